import Foundation
import ProviderCore
import ProviderStore

/// The contents of a `<name>.placeholder` file: the item's metadata as a small JSON object, as
/// Apple's `writePlaceholder(at:withMetadata:)` writes it, so no program mistakes an empty file
/// for the item's contents.
public struct PlaceholderMetadata: Codable, Hashable, Sendable {
    public var domain: String
    public var identifier: String
    public var parentIdentifier: String
    public var filename: String
    public var kind: String
    public var contentType: String
    public var size: Int64
    public var contentModificationDate: Double?
    public var contentVersion: String
    public var metadataVersion: String
    public var symlinkTarget: String?
    /// The store's executable bit (``FileSystemFlags/userExecutable``): a dataless file of the
    /// item has the x bits. Written only when true.
    public var executable: Bool?

    /// The placeholder of a stored item.
    public init(domain: String, record: ItemRecord) {
        self.domain = domain
        identifier = record.identifier.rawValue
        parentIdentifier = record.parentIdentifier.rawValue
        filename = record.filename
        kind = record.kind.rawValue
        contentType = record.contentType
        size = record.size
        contentModificationDate = record.modificationDate?.timeIntervalSince1970
        contentVersion = record.contentVersion.hexString
        metadataVersion = record.metadataVersion.hexString
        symlinkTarget = record.symlinkTarget
        executable = record.isExecutable ? true : nil
    }

    /// Reads a placeholder file. A date no item can have (the file is in the replica, where
    /// any program may write it: 1e300 would trap when a conversion dates a dataless file with
    /// it) is dropped.
    /// - Throws: `corruptData` when the file is not a placeholder.
    public static func read(from data: Data) throws(FileProviderError) -> PlaceholderMetadata {
        var metadata: PlaceholderMetadata
        do {
            metadata = try JSONDecoder().decode(PlaceholderMetadata.self, from: data)
        } catch {
            throw FileProviderError(.corruptData, "not a placeholder file: \(error)")
        }
        if let seconds = metadata.contentModificationDate,
            ItemBounds.problem(withDate: Date(timeIntervalSince1970: seconds), "date") != nil
        {
            metadata.contentModificationDate = nil
        }
        return metadata
    }

    /// The JSON bytes, written by hand: JSONEncoder is too slow for 100,000 placeholders.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(320)
        out.append(contentsOf: "{\"domain\":".utf8)
        Self.appendString(domain, to: &out)
        out.append(contentsOf: ",\"identifier\":".utf8)
        Self.appendString(identifier, to: &out)
        out.append(contentsOf: ",\"parentIdentifier\":".utf8)
        Self.appendString(parentIdentifier, to: &out)
        out.append(contentsOf: ",\"filename\":".utf8)
        Self.appendString(filename, to: &out)
        out.append(contentsOf: ",\"kind\":\"\(kind)\",\"contentType\":".utf8)
        Self.appendString(contentType, to: &out)
        out.append(contentsOf: ",\"size\":\(size)".utf8)
        if let date = contentModificationDate {
            out.append(contentsOf: ",\"contentModificationDate\":\(date)".utf8)
        }
        out.append(contentsOf: ",\"contentVersion\":\"\(contentVersion)\",\"metadataVersion\":\"\(metadataVersion)\"".utf8)
        if let target = symlinkTarget {
            out.append(contentsOf: ",\"symlinkTarget\":".utf8)
            Self.appendString(target, to: &out)
        }
        if executable == true { out.append(contentsOf: ",\"executable\":true".utf8) }
        out.append(contentsOf: "}\n".utf8)
        return out
    }

    private static func appendString(_ string: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
            case 0..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xf)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
