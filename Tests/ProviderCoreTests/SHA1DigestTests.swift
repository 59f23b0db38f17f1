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

@Suite struct SHA256DigestTests {
    /// FIPS 180-4's examples: the empty message, one block, two blocks; and fed in pieces.
    @Test func knownDigests() {
        func digest(_ text: String, piece: Int = .max) -> String {
            var digest = SHA256Digest()
            let bytes = Array(text.utf8)
            var start = 0
            repeat {
                let end = min(bytes.count, start + piece)
                bytes[start..<end].withUnsafeBytes { digest.update($0) }
                start = end
            } while start < bytes.count
            return digest.finish()
        }
        #expect(digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let twoBlocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(digest(twoBlocks) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(digest(twoBlocks, piece: 7) == digest(twoBlocks))
        #expect(ContentHash("SHA256:ABCDEF") == ContentHash("sha256:abcdef"))
        #expect(ContentHash("sha256") == nil && ContentHash("sha256:xyz") == nil)
    }
}

@Suite struct MD5DigestTests {
    /// RFC 1321's test suite, each also fed in pieces that cross the 64-byte blocks.
    @Test func rfc1321Vectors() {
        let vectors = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a"
            ),
        ]
        for (text, expected) in vectors {
            for piece in [1, 7, 64, 1_000] {
                let bytes = Array(text.utf8)
                var digest = MD5Digest()
                for start in stride(from: 0, to: bytes.count, by: piece) {
                    bytes[start..<min(start + piece, bytes.count)].withUnsafeBytes { digest.update($0) }
                }
                #expect(digest.finish() == expected, "\"\(text)\" in pieces of \(piece)")
            }
        }
    }
}
