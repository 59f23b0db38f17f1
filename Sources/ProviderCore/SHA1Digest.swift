import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// SHA-1 (FIPS 180-4), streamed: for checksums that detect damage in transit, never for
/// security (Nextcloud's and ownCloud's `OC-Checksum: SHA1:<hex>`, Apache's `{SHA}` password
/// form in test configurations).
public struct SHA1Digest: Sendable {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
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

    /// The digest as 40 lowercase hex digits.
    public mutating func finish() -> String {
        finishBytes().map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined()
    }

    /// The digest's 20 bytes.
    public mutating func finishBytes() -> [UInt8] {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        while (pending.count + tail.count) % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let saved = length
        tail.withUnsafeBytes { update($0) }
        length = saved
        return [h.0, h.1, h.2, h.3, h.4].flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
    }

    private mutating func compress(_ block: UnsafeRawBufferPointer) {
        var w = [UInt32](repeating: 0, count: 80)
        for i in 0..<16 {
            w[i] = UInt32(block[i * 4]) << 24 | UInt32(block[i * 4 + 1]) << 16 | UInt32(block[i * 4 + 2]) << 8 | UInt32(block[i * 4 + 3])
        }
        for i in 16..<80 {
            let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
            w[i] = x << 1 | x >> 31
        }
        var (a, b, c, d, e) = h
        for i in 0..<80 {
            let (f, k): (UInt32, UInt32)
            switch i {
            case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
            case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
            case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
            default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
            }
            let temp = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
            (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, temp)
        }
        h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
    }

    /// The SHA-1 of a file's contents, read in 1 MiB blocks; call it off the cooperative pool.
    ///
    /// - Throws: `localIOFailure` when the file cannot be read.
    public static func ofFile(_ path: String) throws(FileProviderError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw FileProviderError(.localIOFailure, "cannot read \(path) to checksum it: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var digest = SHA1Digest()
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
