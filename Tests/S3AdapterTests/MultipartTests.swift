import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// Multipart uploads against the SeaweedFS cluster and moto, with the threshold lowered so that
/// a file of 20 MiB goes in parts of 5 MiB: the object reads back whole with the ETag the
/// parts make, an interrupted upload is resumed with its parts checked and kept, an upload of
/// other parts is aborted rather than resumed, abandoned uploads are aborted, and a stale base
/// version leaves nothing behind.
@Suite("S3 multipart uploads")
struct MultipartTests {
    enum Server: String, CaseIterable, Sendable { case seaweedfs, moto }

    static let settings = MultipartSettings(threshold: 8 << 20, minimumPartSize: 5 << 20)

    static func backend(_ server: Server, multipart: MultipartSettings = settings) async throws -> S3Backend {
        let prefix = "multipart-\(UUID().uuidString)"
        switch server {
        case .seaweedfs:
            let (cluster, bucket) = try await SharedSeaweedFS.cluster()
            return try await S3Backend(
                endpoint: cluster.endpoint, bucket: bucket, prefix: prefix, region: cluster.region, pathStyle: true,
                credentials: (cluster.accessKey, cluster.secretKey, nil), multipart: multipart)
        case .moto:
            let (moto, bucket) = try await SharedMoto.server()
            return try await S3Backend(
                endpoint: moto.endpoint, bucket: bucket, prefix: prefix, region: moto.region, pathStyle: true,
                credentials: (moto.accessKey, moto.secretKey, nil), multipart: multipart)
        }
    }

    /// A folder of its own, removed when the test ends.
    final class Scratch: Sendable {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("s3-multipart-\(UUID().uuidString)")
        init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(at: url) }

        /// A file of `size` bytes that differ with `seed`.
        func file(_ name: String, size: Int, seed: UInt8) throws -> (URL, Data) {
            var bytes = [UInt8](repeating: 0, count: size)
            var state = UInt32(seed) &* 2_654_435_761 | 1
            for index in 0..<size {
                state ^= state << 13
                state ^= state >> 17
                state ^= state << 5
                bytes[index] = UInt8(truncatingIfNeeded: state)
            }
            let data = Data(bytes)
            let url = url.appendingPathComponent(name)
            try data.write(to: url)
            return (url, data)
        }

        func download(_ backend: S3Backend, _ identifier: ItemIdentifier, version: ItemVersion?) async throws -> Data {
            let destination = url.appendingPathComponent("down-\(UUID().uuidString)")
            _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
            _ = try await backend.fetchContents(for: identifier, version: version, to: destination, offset: 0, progress: nil)
            return try Data(contentsOf: destination)
        }
    }

    /// The ETag S3 gives an object made of `parts`: the MD5 of their MD5s, a dash, their count.
    static func multipartETag(_ data: Data, partSize: Int) -> String {
        var md5s: [UInt8] = []
        var offset = 0
        var count = 0
        while offset < data.count {
            var digest = MD5Digest()
            data[offset..<min(data.count, offset + partSize)].withUnsafeBytes { digest.update($0) }
            md5s += digest.finishBytes()
            offset += partSize
            count += 1
        }
        return FileDigests.hex(FileDigests.md5(of: md5s)) + "-\(count)"
    }

    static func template(_ name: String, size: Int) -> Item {
        Item.template(identifier: ItemIdentifier("tmp-\(name)"), parent: .rootContainer, filename: name, kind: .file, size: Int64(size))
    }

    @Test(arguments: Server.allCases)
    func aLargeFileGoesInPartsReadsBackWholeAndIsReplacedOnlyFromItsVersion(_ server: Server) async throws {
        let backend = try await Self.backend(server)
        let scratch = try Scratch()
        let size = 20 << 20 + 123
        let (file, data) = try scratch.file("big", size: size, seed: 1)
        let created = try await backend.createItem(
            basedOn: Self.template("big.bin", size: size), fields: [.contents], contents: file, options: [])
        let etag = String(decoding: created.item.version.content, as: UTF8.self)
        #expect(etag == Self.multipartETag(data, partSize: 5 << 20))
        #expect(etag.hasSuffix("-5"))
        #expect(created.item.size == Int64(size))
        #expect(try await scratch.download(backend, created.item.identifier, version: created.item.version) == data)

        // A modification from the current version replaces it; one from the old version is refused
        // (If-Match on CompleteMultipartUpload) and leaves no upload behind.
        let (second, newData) = try scratch.file("second", size: 12 << 20, seed: 2)
        let modified = try await backend.modifyItem(
            created.item, baseVersion: created.item.version, changedFields: [.contents], contents: second, options: [])
        #expect(try await scratch.download(backend, modified.item.identifier, version: modified.item.version) == newData)
        let stale = await #expect(throws: FileProviderError.self) {
            try await backend.modifyItem(
                created.item, baseVersion: created.item.version, changedFields: [.contents], contents: file, options: [])
        }
        #expect(stale?.code == .versionOutOfDate)
        let path = try ItemPath(modified.item.identifier)
        let raced = await #expect(throws: FileProviderError.self) {
            try await backend.putMultipart(file, size: Int64(size), at: path, condition: "If-Match: \"\(etag)\"")
        }
        #expect(raced?.code == .versionOutOfDate)
        #expect(try await scratch.download(backend, modified.item.identifier, version: nil) == newData)
        #expect(try await backend.pendingUploads(prefix: backend.prefix).isEmpty)

        // Creating over an existing object is refused the same way (If-None-Match: *).
        let collision = await #expect(throws: FileProviderError.self) {
            try await backend.createItem(basedOn: Self.template("big.bin", size: size), fields: [.contents], contents: file, options: [])
        }
        #expect(collision?.code == .filenameCollision)
        #expect(try await backend.pendingUploads(prefix: backend.prefix).isEmpty)
        await backend.close()
    }

    @Test(arguments: Server.allCases)
    func anInterruptedUploadIsResumedWithTheSameBytesKept(_ server: Server) async throws {
        let backend = try await Self.backend(server)
        let scratch = try Scratch()
        let size = 20 << 20 + 5
        let (file, data) = try scratch.file("resume", size: size, seed: 3)
        let path = try ItemPath(ItemIdentifier("resumed.bin"))
        let key = backend.key(path)
        // A run that sent two parts and died.
        let ranges = Self.settings.parts(for: Int64(size))
        let id = try await backend.createUpload(key: key, display: path.display)
        for number in [1, 3] {
            let digest = try FileDigests.of(file: file.path, range: ranges[number - 1], sha256: false)
            try await backend.uploadPart(
                file: file.path, range: ranges[number - 1], number: number, md5: digest, key: key, uploadID: id, of: path)
        }
        // Part 2 was sent from other bytes (the file changed since): it is sent again.
        let (other, _) = try scratch.file("other", size: size, seed: 4)
        let otherDigest = try FileDigests.of(file: other.path, range: ranges[1], sha256: false)
        try await backend.uploadPart(file: other.path, range: ranges[1], number: 2, md5: otherDigest, key: key, uploadID: id, of: path)

        let outcome = try await backend.putMultipart(file, size: Int64(size), at: path, condition: "If-None-Match: *")
        #expect(outcome.uploadID == id)
        #expect(outcome.partsKept == 2)
        #expect(outcome.partsSent == ranges.count - 2)
        #expect(outcome.etag == Self.multipartETag(data, partSize: 5 << 20))
        #expect(try await scratch.download(backend, path.identifier, version: nil) == data)
        #expect(try await backend.pendingUploads(prefix: backend.prefix).isEmpty)
        await backend.close()
    }

    @Test(arguments: Server.allCases)
    func anUploadCutIntoOtherPartsIsAbortedNotResumed(_ server: Server) async throws {
        let backend = try await Self.backend(server)
        let scratch = try Scratch()
        let size = 20 << 20
        let (file, data) = try scratch.file("recut", size: size, seed: 5)
        let path = try ItemPath(ItemIdentifier("recut.bin"))
        let key = backend.key(path)
        // An earlier run cut the file into parts of 6 MiB.
        let id = try await backend.createUpload(key: key, display: path.display)
        let range: Range<Int64> = 0..<(6 << 20)
        let digest = try FileDigests.of(file: file.path, range: range, sha256: false)
        try await backend.uploadPart(file: file.path, range: range, number: 1, md5: digest, key: key, uploadID: id, of: path)

        let outcome = try await backend.putMultipart(file, size: Int64(size), at: path, condition: nil)
        #expect(outcome.uploadID != id)
        #expect(outcome.partsKept == 0)
        #expect(try await scratch.download(backend, path.identifier, version: nil) == data)
        #expect(try await backend.pendingUploads(prefix: backend.prefix).isEmpty)
        await backend.close()
    }

    @Test func abandonedUploadsUnderThePrefixAreAbortedAndRecentOnesKept() async throws {
        // SeaweedFS only: moto dates every upload 2010-11-10, so there all look abandoned.
        let patient = try await Self.backend(.seaweedfs)
        let path = try ItemPath(ItemIdentifier("left.bin"))
        let id = try await patient.createUpload(key: patient.key(path), display: path.display)
        #expect(try await patient.abortAbandonedUploads() == 0)
        #expect(try await patient.pendingUploads(prefix: patient.prefix).map(\.uploadID) == [id])

        let (cluster, bucket) = try await SharedSeaweedFS.cluster()
        var impatientSettings = Self.settings
        impatientSettings.abandonedAfter = 0
        let impatient = try await S3Backend(
            endpoint: cluster.endpoint, bucket: bucket, prefix: patient.prefix, region: cluster.region, pathStyle: true,
            credentials: (cluster.accessKey, cluster.secretKey, nil), multipart: impatientSettings)
        #expect(try await impatient.abortAbandonedUploads() == 1)
        #expect(try await patient.pendingUploads(prefix: patient.prefix).isEmpty)
        await impatient.close()
        await patient.close()
    }

    @Test func partSizesKeepUploadsWithinTenThousandParts() {
        let settings = MultipartSettings()
        #expect(settings.partSize(for: 100 << 20) == 8 << 20)
        let fiveTiB: Int64 = 5 << 40
        let part = settings.partSize(for: fiveTiB)
        #expect((fiveTiB + part - 1) / part <= 10_000)
        #expect(part % (1 << 20) == 0)
        #expect(settings.parts(for: 20 << 20 + 1).map(\.count).suffix(2) == [8 << 20, 4 << 20 + 1])
        #expect(throws: FileProviderError.self) { try MultipartSettings(minimumPartSize: 1 << 20).check() }
    }

    @Test func thresholdAndPartSizeOptionsAreCheckedBeforeConnecting() async {
        for (name, value) in [("multipart-threshold", "0"), ("multipart-threshold", "6000"), ("part-size", "4"), ("part-size", "x")] {
            let error = await #expect(throws: FileProviderError.self) {
                _ = try await S3Backend.descriptor.factory(
                    BackendConfiguration(["bucket": "b-unused", "endpoint": "http://127.0.0.1:1", name: value]))
            }
            #expect(error?.code == .invalidArgument)
            #expect(error?.message.contains("--\(name)") == true, "\(error?.message ?? "")")
        }
    }

    @Test func md5MatchesKnownDigests() {
        func hex(_ text: String) -> String { FileDigests.hex(FileDigests.md5(of: Array(text.utf8))) }
        #expect(hex("") == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(hex("abc") == "900150983cd24fb0d6963f7d28e17f72")
        #expect(hex(String(repeating: "1234567890", count: 8)) == "57edf4a22be3c955ac49da2e2107b67a")
    }
}
