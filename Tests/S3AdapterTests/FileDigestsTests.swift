import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// A file's digests, read in blocks sized to the file (at most 1 MiB, at least 64 KiB), are
/// those of its bytes hashed in one piece, for sizes around the block edges and for ranges.
@Suite struct FileDigestsTests {
    static func bytes(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 11) } }

    static func whole(_ bytes: [UInt8]) -> (md5: [UInt8], sha256: [UInt8]) {
        var sha = SHA256Digest()
        bytes.withUnsafeBytes { sha.update($0) }
        return (FileDigests.md5(of: bytes), sha.finishBytes())
    }

    @Test(arguments: [0, 1, 4096, 64 << 10, (64 << 10) + 1, 1 << 20, (1 << 20) + 3, (2 << 20) + 5])
    func aWholeFileHasTheDigestsOfItsBytes(_ size: Int) throws {
        let folder = try TemporaryFolder()
        let file = folder.url.appendingPathComponent("file")
        let bytes = Self.bytes(size)
        try Data(bytes).write(to: file)
        let digests = try FileDigests.of(file: file.path, sha256: true)
        let expected = Self.whole(bytes)
        #expect(digests.md5 == expected.md5)
        #expect(digests.sha256 == expected.sha256)
        #expect(try FileDigests.of(file: file.path, sha256: false).sha256 == nil)
    }

    @Test(arguments: [(0, 1), (5, 4101), (100, (1 << 20) + 100), (70_000, (2 << 20) + 5), ((2 << 20) + 4, (2 << 20) + 5)])
    func aRangeHasTheDigestsOfItsBytes(_ lower: Int, _ upper: Int) throws {
        let folder = try TemporaryFolder()
        let file = folder.url.appendingPathComponent("file")
        let bytes = Self.bytes((2 << 20) + 5)
        try Data(bytes).write(to: file)
        let digests = try FileDigests.of(file: file.path, range: Int64(lower)..<Int64(upper), sha256: true)
        let expected = Self.whole(Array(bytes[lower..<upper]))
        #expect(digests.md5 == expected.md5)
        #expect(digests.sha256 == expected.sha256)
    }

    @Test func aRangePastTheEndIsALocalIOFailure() throws {
        let folder = try TemporaryFolder()
        let file = folder.url.appendingPathComponent("file")
        try Data(Self.bytes(10)).write(to: file)
        #expect(throws: FileProviderError.self) { try FileDigests.of(file: file.path, range: 0..<11, sha256: false) }
    }
}
