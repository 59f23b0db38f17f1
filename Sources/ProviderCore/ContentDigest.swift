import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A hash of contents fed a piece at a time (``MD5Digest``, ``SHA1Digest``, ``SHA256Digest``).
public protocol ContentDigest: Sendable {
    init()
    mutating func update(_ bytes: UnsafeRawBufferPointer)
    /// The digest's bytes; the digest is used up.
    mutating func finishBytes() -> [UInt8]
}

extension ContentDigest {
    /// The digest as lowercase hex digits.
    public mutating func finish() -> String {
        Data(finishBytes()).hexString
    }

    /// The digest of a file's contents, read in 1 MiB blocks, as lowercase hex; call it off the
    /// cooperative pool.
    ///
    /// - Throws: `localIOFailure` when the file cannot be read.
    public static func ofFile(_ path: String) throws(FileProviderError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw FileProviderError(.localIOFailure, "cannot read \(path) to checksum it: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var digest = Self()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileProviderError(.localIOFailure, "cannot read \(path) to checksum it: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            buffer.withUnsafeBytes { digest.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        return digest.finish()
    }
}

/// The 64-byte blocks of MD5, SHA-1 and SHA-2 (RFC 1321, FIPS 180-4): bytes gathered into
/// whole blocks, and the padding with the message's length in bits at the end (little-endian
/// for MD5, big-endian for the SHAs).
struct DigestBlocks: Sendable {
    private var pending: [UInt8] = []
    private var length: UInt64 = 0
    private let littleEndianLength: Bool

    init(littleEndianLength: Bool = false) { self.littleEndianLength = littleEndianLength }

    /// Hands `compress` every whole block of what came so far.
    mutating func update(_ bytes: UnsafeRawBufferPointer, _ compress: (UnsafeRawBufferPointer) -> Void) {
        length &+= UInt64(bytes.count)
        var index = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: bytes[0..<take])
            index = take
            if pending.count == 64 {
                pending.withUnsafeBytes { compress($0) }
                pending.removeAll(keepingCapacity: true)
            }
        }
        while bytes.count - index >= 64 {
            compress(UnsafeRawBufferPointer(rebasing: bytes[index..<index + 64]))
            index += 64
        }
        if index < bytes.count { pending.append(contentsOf: bytes[index...]) }
    }

    /// Hands `compress` the last blocks: the rest, padded, with the length.
    mutating func finish(_ compress: (UnsafeRawBufferPointer) -> Void) {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        while (pending.count + tail.count) % 64 != 56 { tail.append(0) }
        let shifts = littleEndianLength ? Array(stride(from: 0, through: 56, by: 8)) : Array(stride(from: 56, through: 0, by: -8))
        for shift in shifts { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        tail.withUnsafeBytes { update($0, compress) }
    }

    /// The big-endian bytes of words.
    static func bytes(_ words: [UInt32]) -> [UInt8] {
        words.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
    }
}
