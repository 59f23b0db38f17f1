import Foundation

/// The bytes of an ``ItemVersion`` part, built on the stack and copied into `Data` once: a
/// tag byte, then integers little-endian, at most 32 bytes in all. Listings make two versions
/// per item; appending to `Data` piece by piece cost more than the `stat` of a local file.
///
/// ```swift
/// let content = VersionBytes(tag: 0x66).appending(size).appending(modificationNanos).data
/// ```
public struct VersionBytes: Sendable {
    // Inlinable (with `appending`): a backend builds two versions per listed item, and a generic
    // call not specialized for its integer type costs more than the rest of the work.
    @usableFromInline var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    @usableFromInline var count = 0

    /// Starts with a tag byte that says what kind of version follows.
    public init(tag: UInt8) { append(tag) }

    /// Adds an integer, little-endian. At most 32 bytes in all.
    @inlinable public func appending<T: FixedWidthInteger>(_ value: T) -> VersionBytes {
        var copy = self
        copy.append(value)
        return copy
    }

    @inlinable mutating func append<T: FixedWidthInteger>(_ value: T) {
        let size = MemoryLayout<T>.size
        precondition(count + size <= 32, "a version holds at most 32 bytes")
        withUnsafeMutableBytes(of: &bytes) { buffer in
            buffer.storeBytes(of: value.littleEndian, toByteOffset: count, as: T.self)
        }
        count += size
    }

    /// The bytes, as stored in an ``ItemVersion``.
    public var data: Data { withUnsafeBytes(of: bytes) { Data(bytes: $0.baseAddress!, count: count) } }
}
