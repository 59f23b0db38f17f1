#if canImport(Glibc)
    import Glibc
#endif

/// One name in a folder as the kernel passes it: bytes (Linux names need not be UTF-8), never
/// empty, never `.` or `..`, without `/` or NUL (the kernel checks), at most 255 bytes. Also the
/// name of an extended attribute (`user.color`: at most 255 bytes, no NUL, `/` allowed).
public struct FUSEName: Sendable, Hashable, CustomStringConvertible {
    /// The name's bytes, without a terminating NUL.
    public let bytes: [UInt8]

    /// The name from its bytes.
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// The name from a string's UTF-8 bytes.
    public init(_ string: String) { bytes = Array(string.utf8) }

    /// The name from a NUL-terminated C string.
    init(cString: UnsafePointer<CChar>) {
        bytes = Array(UnsafeRawBufferPointer(start: cString, count: strlen(cString)))
    }

    /// The name as a string, or nil when its bytes are not valid UTF-8.
    public var string: String? { String(validating: bytes, as: UTF8.self) }

    /// The name for messages (invalid UTF-8 shown with replacement characters).
    public var description: String { String(decoding: bytes, as: UTF8.self) }

    /// Calls `body` with the name as a NUL-terminated C string.
    func withCString<T>(_ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
        try (bytes + [0]).withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }
}
