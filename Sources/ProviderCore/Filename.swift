/// Checks on names that come from a store or a user. A name from a server is never trusted.
public enum Filename {
    /// The longest name in bytes (UTF-8), as on ext4.
    public static let maximumByteCount = 255

    /// Checks that `name` can be used as one path component inside a replica.
    ///
    /// - Throws: `FileProviderError.Code.invalidFilename` when the name is empty, `.` or `..`,
    ///   contains `/` or NUL, or is longer than 255 bytes in UTF-8.
    public static func validate(_ name: String) throws(FileProviderError) {
        if let problem = problem(with: name) {
            throw FileProviderError(.invalidFilename, "unsafe name \(name.debugDescription): \(problem)")
        }
    }

    /// Whether `name` is a safe single path component.
    public static func isValid(_ name: String) -> Bool { problem(with: name) == nil }

    private static func problem(with name: String) -> String? {
        if name.isEmpty { return "the name is empty" }
        if name == "." || name == ".." { return "'.' and '..' are not names" }
        var count = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: "/") { return "it contains '/'" }
            if byte == 0 { return "it contains NUL" }
            count += 1
        }
        if count > maximumByteCount { return "it is \(count) bytes long; the limit is 255" }
        return nil
    }

    /// Decodes bytes from a store as a name; `nil` when they are not valid UTF-8.
    public static func decode(_ bytes: some Collection<UInt8>) -> String? {
        // ASCII (most names) is valid as it is: no call into the standard library's generic
        // validation, which looks up type metadata per call (a tenth of a local listing's own CPU).
        let ascii = bytes.withContiguousStorageIfAvailable { buffer -> String? in
            buffer.allSatisfy { $0 < 0x80 } ? String(decoding: buffer, as: UTF8.self) : nil
        }
        if let ascii, let ascii { return ascii }
        return String(validating: bytes, as: UTF8.self)
    }
}
