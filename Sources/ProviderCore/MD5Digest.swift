import Foundation

/// MD5 (RFC 1321), streamed: what S3 names an object's bytes with (the ETag of a single-part
/// upload, `Content-MD5`, a part's ETag). Detects damage in transit; never used for security.
public struct MD5Digest: ContentDigest {
    private var state: (UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476)
    private var blocks = DigestBlocks(littleEndianLength: true)

    private static let shifts: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]
    private static let k: [UInt32] = (0..<64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4_294_967_296)) }

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var copy = state
        blocks.update(bytes) { Self.compress($0, &copy) }
        state = copy
    }

    /// The digest's 16 bytes.
    public mutating func finishBytes() -> [UInt8] {
        var copy = state
        blocks.finish { Self.compress($0, &copy) }
        state = copy
        return [state.0, state.1, state.2, state.3].flatMap { word in
            (0..<4).map { UInt8(truncatingIfNeeded: word >> (8 * UInt32($0))) }
        }
    }

    private static func compress(_ block: UnsafeRawBufferPointer, _ h: inout (UInt32, UInt32, UInt32, UInt32)) {
        var m = [UInt32](repeating: 0, count: 16)
        for index in 0..<16 {
            let base = index * 4
            m[index] =
                UInt32(block[base]) | UInt32(block[base + 1]) << 8 | UInt32(block[base + 2]) << 16 | UInt32(block[base + 3]) << 24
        }
        var (a, b, c, d) = h
        for index in 0..<64 {
            var f: UInt32
            let g: Int
            switch index {
            case 0..<16:
                f = (b & c) | (~b & d)
                g = index
            case 16..<32:
                f = (d & b) | (~d & c)
                g = (5 &* index &+ 1) % 16
            case 32..<48:
                f = b ^ c ^ d
                g = (3 &* index &+ 5) % 16
            default:
                f = c ^ (b | ~d)
                g = (7 &* index) % 16
            }
            f = f &+ a &+ k[index] &+ m[g]
            a = d
            d = c
            c = b
            let shift = shifts[index]
            b = b &+ ((f << shift) | (f >> (32 - shift)))
        }
        h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d)
    }
}
