import Foundation

/// The version of an item, in two opaque parts as in Apple's `NSFileProviderItemVersion`.
///
/// A change of `content` means the bytes changed and must be downloaded again; a change of
/// `metadata` alone means only the item's metadata (name, dates, ...) must be updated. Each part
/// is at most ``maximumLength`` bytes.
public struct ItemVersion: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The longest a version part may be, in bytes.
    public static let maximumLength = 128

    public var content: Data
    public var metadata: Data

    /// Creates a version; parts longer than ``maximumLength`` are cut to that length.
    public init(content: Data, metadata: Data) {
        // Cut only when longer: `prefix` makes a slice of every version (3% of a local
        // listing's CPU, a version or two per entry), and they are almost never that long.
        self.content = content.count > Self.maximumLength ? content.prefix(Self.maximumLength) : content
        self.metadata = metadata.count > Self.maximumLength ? metadata.prefix(Self.maximumLength) : metadata
    }

    /// A version of items that do not have one yet (a template before creation).
    public static let empty = ItemVersion(content: Data(), metadata: Data())

    public var description: String {
        "\(content.hexString)/\(metadata.hexString)"
    }
}

extension Data {
    /// The UTF-8 bytes of `text`, at most `limit` of them, after the byte `tag` when one is
    /// given: the versions backends make of ETags and dates, one per listed entry and
    /// download. Copied in one piece: Foundation's `Data(text.utf8)` goes byte by byte and
    /// `append` to a `Data` costs as much again (300–900 ns against 270 for a 20-byte tag).
    public init(utf8 text: String, tag: UInt8? = nil, limit: Int = .max) {
        var text = text
        self = text.withUTF8 { source in
            let taken = UnsafeBufferPointer(rebasing: source.prefix(Swift.max(0, limit)))
            let offset = tag == nil ? 0 : 1
            var bytes = Data(count: taken.count + offset)
            bytes.withUnsafeMutableBytes { destination in
                if let tag { destination[0] = tag }
                UnsafeMutableRawBufferPointer(rebasing: destination[offset...]).copyMemory(from: UnsafeRawBufferPointer(taken))
            }
            return bytes
        }
    }

    /// The bytes as lowercase hexadecimal.
    public var hexString: String {
        // Written in place: every download's and upload's content hash comes here.
        func digit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10 }
        return withUnsafeBytes { bytes in
            String(unsafeUninitializedCapacity: bytes.count * 2) { out in
                for (index, byte) in bytes.enumerated() {
                    out[2 * index] = digit(byte >> 4)
                    out[2 * index + 1] = digit(byte & 0x0f)
                }
                return bytes.count * 2
            }
        }
    }
}
