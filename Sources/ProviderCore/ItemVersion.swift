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
        self.content = content.prefix(Self.maximumLength)
        self.metadata = metadata.prefix(Self.maximumLength)
    }

    /// A version of items that do not have one yet (a template before creation).
    public static let empty = ItemVersion(content: Data(), metadata: Data())

    public var description: String {
        "\(content.hexString)/\(metadata.hexString)"
    }
}

extension Data {
    /// The bytes as lowercase hexadecimal.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
