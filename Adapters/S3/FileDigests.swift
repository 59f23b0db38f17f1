import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The MD5 (and, when asked, the SHA-256) of a local file's bytes, or of a range of them,
/// read once in 1 MiB blocks: what an upload sends as `Content-MD5` and
/// `x-amz-checksum-sha256` and checks the ETag against, and what a download is checked with.
/// Call it off the cooperative pool.
struct FileDigests: Sendable {
    /// The MD5's 16 bytes.
    var md5: [UInt8]
    /// The SHA-256's 32 bytes, when asked for.
    var sha256: [UInt8]?

    /// The MD5 as lower-case hex digits (an ETag's form).
    var md5Hex: String { Self.hex(md5) }

    /// Bytes as lower-case hex digits.
    static func hex(_ bytes: [UInt8]) -> String { Data(bytes).hexString }

    /// The bytes of hex digits (either case); `nil` for anything else or an odd count.
    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// The MD5 of bytes in memory (a multipart ETag's: the MD5 of its parts' MD5s).
    static func md5(of bytes: [UInt8]) -> [UInt8] {
        var digest = LibCryptoMD5()
        bytes.withUnsafeBytes { digest.update($0) }
        return digest.finishBytes()
    }

    /// - Parameters:
    ///   - range: the bytes to hash, or `nil` for the whole file.
    ///   - sha256: whether to compute the SHA-256 too.
    /// - Throws: `localIOFailure` when the file cannot be read, or ends before the range does.
    static func of(file path: String, range: Range<Int64>? = nil, sha256: Bool) throws(FileProviderError) -> FileDigests {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw FileProviderError(.localIOFailure, "cannot read \(path) to checksum it: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        // libcrypto's: ProviderCore's Swift MD5 and SHA-256 cost an upload of 1 GiB in parts
        // 5.5 CPU-s more (Docs/Performance.md, S3).
        var md5 = LibCryptoMD5()
        var sha = sha256 ? LibCryptoSHA256() : nil
        var offset = range?.lowerBound ?? 0
        let end = range?.upperBound ?? .max
        // A buffer the size of what is to be read, up to 1 MiB, and not zeroed: a zeroed 1 MiB
        // buffer per file (mapped, faulted in page by page, unmapped) was a third of the CPU of
        // an upload or download of 4 KiB files. A file that grows meanwhile is read on in
        // pieces of that size.
        var expected = end - offset
        if range == nil {
            var status = stat()
            expected = fstat(fd, &status) == 0 ? Int64(status.st_size) + 1 : Int64(Self.blockSize)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Int(min(Int64(Self.blockSize), max(Int64(Self.smallestBlock), expected))), alignment: 16)
        defer { buffer.deallocate() }
        while offset < end {
            let want = Int(min(Int64(buffer.count), end - offset))
            let count = pread(fd, buffer.baseAddress, want, off_t(offset))
            if count < 0 {
                if errno == EINTR { continue }
                throw FileProviderError(.localIOFailure, "cannot read \(path) to checksum it: \(String(cString: strerror(errno)))")
            }
            if count == 0 {
                if range == nil { break }
                throw FileProviderError(.localIOFailure, "\(path) ended at byte \(offset) while it was uploaded; it changed")
            }
            let part = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
            md5.update(part)
            sha?.update(part)
            offset += Int64(count)
        }
        return FileDigests(md5: md5.finishBytes(), sha256: sha?.finishBytes())
    }

    /// The largest read.
    static let blockSize = 1 << 20
    /// The smallest buffer (a file that grows while it is read is read in pieces this large).
    static let smallestBlock = 64 << 10
}
