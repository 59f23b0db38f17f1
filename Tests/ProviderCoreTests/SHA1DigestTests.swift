import Foundation
import ProviderCore
import Testing

@Suite struct SHA1DigestTests {
    static func digest(_ chunks: [[UInt8]]) -> String {
        var digest = SHA1Digest()
        for chunk in chunks { chunk.withUnsafeBytes { digest.update($0) } }
        return digest.finish()
    }

    @Test func knownVectors() {
        #expect(Self.digest([]) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(Self.digest([Array("abc".utf8)]) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        let long = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(Self.digest([long]) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    /// The same bytes in chunks of every size give the same digest (blocks cross chunks).
    @Test func chunkingDoesNotChangeTheDigest() {
        let bytes = (0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let whole = Self.digest([bytes])
        for size in [1, 7, 63, 64, 65, 200] {
            let chunks = stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
            #expect(Self.digest(chunks) == whole, "chunks of \(size)")
        }
        var digest = SHA1Digest()
        bytes.withUnsafeBytes { digest.update($0) }
        #expect(digest.finishBytes().count == 20)
    }
}
