import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// SHA-1 (FIPS 180-4), streamed: for checksums that detect damage in transit, never for
/// security (Nextcloud's and ownCloud's `OC-Checksum: SHA1:<hex>`, Apache's `{SHA}` password
/// form in test configurations).
public struct SHA1Digest: ContentDigest {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
    private var blocks = DigestBlocks()

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var state = h
        blocks.update(bytes) { Self.compress($0, &state) }
        h = state
    }

    /// The digest's 20 bytes.
    public mutating func finishBytes() -> [UInt8] {
        var state = h
        blocks.finish { Self.compress($0, &state) }
        h = state
        return DigestBlocks.bytes([h.0, h.1, h.2, h.3, h.4])
    }

    private static func compress(_ block: UnsafeRawBufferPointer, _ h: inout (UInt32, UInt32, UInt32, UInt32, UInt32)) {
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
}
