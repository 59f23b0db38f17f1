import Foundation
import ProviderCore
import Testing

@testable import AdapterKit

/// libcrypto's MD5 and SHA-256 give the published test vectors, and the digests of
/// ProviderCore's Swift ones for bytes fed in pieces of any size.
@Suite struct LibCryptoDigestTests {
    static func hex<D: ContentDigest>(_ digest: D.Type, _ pieces: [[UInt8]]) -> String {
        var value = D()
        for piece in pieces { piece.withUnsafeBytes { value.update($0) } }
        return value.finish()
    }

    @Test func theyGiveThePublishedVectors() {
        #expect(Self.hex(LibCryptoMD5.self, []) == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(Self.hex(LibCryptoMD5.self, [Array("abc".utf8)]) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Self.hex(LibCryptoSHA256.self, []) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            Self.hex(LibCryptoSHA256.self, [Array("a".utf8), Array("bc".utf8)])
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test(arguments: [1, 63, 64, 65, 4096, 100_003])
    func piecesGiveTheDigestsOfTheSwiftOnes(_ pieceSize: Int) {
        let bytes = (0..<300_001).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 9) }
        let pieces = stride(from: 0, to: bytes.count, by: pieceSize).map { Array(bytes[$0..<min(bytes.count, $0 + pieceSize)]) }
        #expect(Self.hex(LibCryptoMD5.self, pieces) == Self.hex(MD5Digest.self, [bytes]))
        #expect(Self.hex(LibCryptoSHA256.self, pieces) == Self.hex(SHA256Digest.self, [bytes]))
    }
}
