#if canImport(Glibc)
    import Glibc
#endif

/// An opaque, string-backed identifier of an item, owned by the backend.
///
/// Backends choose identifiers. Path-addressed stores may derive them from the item's path; a
/// rename or move then returns an item with a new identifier and the engine re-keys the item
/// (and, for a folder, its descendants).
public struct ItemIdentifier: RawRepresentable, Hashable, Comparable, Sendable, Codable,
    CustomStringConvertible, ExpressibleByStringLiteral
{
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The root folder of a domain.
    public static let rootContainer = ItemIdentifier("NSFileProviderRootContainerItemIdentifier")
    /// The trash of a domain, for backends that have one.
    public static let trashContainer = ItemIdentifier("NSFileProviderTrashContainerItemIdentifier")
    /// The working set: every item the system should keep up to date.
    public static let workingSet = ItemIdentifier("NSFileProviderWorkingSetContainerItemIdentifier")

    public var description: String { rawValue }

    /// Identifiers are equal when their UTF-8 bytes are: file systems keep NFC and NFD
    /// spellings of a name apart, and so do identifiers (Swift's `String ==` would merge them).
    public static func == (lhs: ItemIdentifier, rhs: ItemIdentifier) -> Bool {
        lhs.withBytes { a in
            rhs.withBytes { b in a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0) }
        }
    }

    public func hash(into hasher: inout Hasher) {
        // All bytes at once: a byte at a time made hashing a tenth of a re-sync's CPU.
        withBytes { hasher.combine(bytes: $0) }
        hasher.combine(0xff as UInt8)
    }

    /// Calls `body` with the identifier's UTF-8 bytes (contiguous; a copy only for a string
    /// that is not stored as UTF-8).
    private func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        if let result = rawValue.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
        var copy = rawValue
        copy.makeContiguousUTF8()
        return copy.utf8.withContiguousStorageIfAvailable { body(UnsafeRawBufferPointer($0)) }!
    }

    /// Orders by UTF-8 bytes, as SQLite (`BINARY`) and the backends do (``ByteOrder``, one
    /// `memcmp`).
    public static func < (lhs: ItemIdentifier, rhs: ItemIdentifier) -> Bool {
        lhs.withBytes { a in
            rhs.withBytes { b in ByteOrder.precedes(a.assumingMemoryBound(to: UInt8.self), b.assumingMemoryBound(to: UInt8.self)) }
        }
    }
}
