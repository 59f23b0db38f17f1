import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// Multipart uploads carry our SHA-256: the upload is started with
/// `x-amz-checksum-algorithm: SHA256`, each part sends `x-amz-checksum-sha256` of its bytes,
/// and `CompleteMultipartUpload` lists each part's `ChecksumSHA256`. SeaweedFS 4.48 checks
/// them (a part or a completion that does not match is refused with `BadDigest`:
/// `corruptData`) and gives the object the composite checksum of its parts; moto 5.2.1 takes
/// them without checking, and uploads work there all the same.
@Suite("S3 multipart uploads send their SHA-256")
struct MultipartChecksumTests {
    typealias Server = MultipartTests.Server

    static func sha256(_ data: Data) -> [UInt8] {
        var digest = SHA256Digest()
        data.withUnsafeBytes { digest.update($0) }
        return digest.finishBytes()
    }

    /// The composite checksum of an object of parts of `partSize`: the base64 SHA-256 of the
    /// parts' SHA-256s, one after another.
    static func compositeSHA256(_ data: Data, partSize: Int) -> String {
        var shas: [UInt8] = []
        var offset = 0
        while offset < data.count {
            shas += sha256(data[offset..<min(data.count, offset + partSize)])
            offset += partSize
        }
        return Data(sha256(Data(shas))).base64EncodedString()
    }

    /// The object's checksum as the store gives it (`HEAD` with `x-amz-checksum-mode: ENABLED`).
    static func storedChecksum(_ backend: S3Backend, _ path: ItemPath) async throws -> String? {
        var request = HTTPRequest("HEAD", backend.endpoint(key: backend.key(path)))
        request.headers = ["x-amz-checksum-mode: ENABLED"]
        let reply = try await backend.send(request)
        try backend.check(reply)
        return reply.head["x-amz-checksum-sha256"]
    }

    @Test(arguments: Server.allCases)
    func theStoreTakesEachPartsSHA256(_ server: Server) async throws {
        let backend = try await MultipartTests.backend(server)
        let scratch = try MultipartTests.Scratch()
        let size = 20 << 20 + 99
        let (file, data) = try scratch.file("summed", size: size, seed: 7)
        let created = try await backend.createItem(
            basedOn: MultipartTests.template("summed.bin", size: size), fields: [.contents], contents: file, options: [])
        let composite = Self.compositeSHA256(data, partSize: 5 << 20)
        let stored = try await Self.storedChecksum(backend, try ItemPath(created.item.identifier))
        switch server {
        // The composite checksum with the count of parts, as AWS gives it.
        case .seaweedfs: #expect(stored == composite + "-5")
        // The same composite checksum, without the count.
        case .moto: #expect(stored == composite)
        }
        // The download is checked against what the store gives, and reads back whole.
        #expect(try await scratch.download(backend, created.item.identifier, version: created.item.version) == data)
        await backend.close()
    }

    @Test(arguments: Server.allCases)
    func aPartWhoseBytesDoNotMatchItsSHA256IsRefusedWhereTheStoreChecks(_ server: Server) async throws {
        let backend = try await MultipartTests.backend(server)
        let scratch = try MultipartTests.Scratch()
        let size = 20 << 20 + 3
        let (file, data) = try scratch.file("damaged", size: size, seed: 8)
        let path = try ItemPath(ItemIdentifier("damaged.bin"))
        let key = backend.key(path)
        let ranges = MultipartTests.settings.parts(for: Int64(size))
        let id = try await backend.createUpload(key: key, display: path.display)
        // Bytes damaged between the hash and the wire: the MD5 of what is sent, the SHA-256 of
        // what should have been.
        var digest = try FileDigests.of(file: file.path, range: ranges[0], sha256: true)
        digest.sha256 = Self.sha256(Data("other bytes".utf8))
        do throws(FileProviderError) {
            try await backend.uploadPart(file: file.path, range: ranges[0], number: 1, md5: digest, key: key, uploadID: id, of: path)
            #expect(server == .moto, "SeaweedFS took a part that does not match its SHA-256")
        } catch {
            #expect(server == .seaweedfs, "\(error)")
            #expect(error.code == .corruptData, "\(error)")
            #expect(error.message.contains("BadDigest") && error.message.contains("damaged on the way"), "\(error.message)")
        }
        // The next upload of the file resumes the same upload and sends every part again where
        // the store kept none, or keeps the one moto took (its MD5 is the bytes').
        let outcome = try await backend.putMultipart(file, size: Int64(size), at: path, condition: "If-None-Match: *")
        #expect(outcome.uploadID == id)
        #expect(outcome.partsKept == (server == .moto ? 1 : 0))
        #expect(try await scratch.download(backend, path.identifier, version: nil) == data)
        #expect(try await backend.pendingUploads(prefix: backend.prefix).isEmpty)
        await backend.close()
    }

    @Test func seaweedFSRefusesACompletionThatListsAnotherSHA256() async throws {
        let backend = try await MultipartTests.backend(.seaweedfs)
        let scratch = try MultipartTests.Scratch()
        let size = 12 << 20
        let (file, data) = try scratch.file("listed", size: size, seed: 9)
        let path = try ItemPath(ItemIdentifier("listed.bin"))
        let key = backend.key(path)
        let ranges = MultipartTests.settings.parts(for: Int64(size))
        let id = try await backend.createUpload(key: key, display: path.display)
        var tags: [String] = []
        var checksums: [String] = []
        for (index, range) in ranges.enumerated() {
            let digest = try FileDigests.of(file: file.path, range: range, sha256: true)
            try await backend.uploadPart(file: file.path, range: range, number: index + 1, md5: digest, key: key, uploadID: id, of: path)
            tags.append(digest.md5Hex)
            checksums.append(Data(digest.sha256 ?? []).base64EncodedString())
        }
        checksums[1] = Data(Self.sha256(Data("other bytes".utf8))).base64EncodedString()
        let refused = await #expect(throws: FileProviderError.self) {
            try await backend.completeUpload(
                key: key, uploadID: id, partTags: tags, partChecksums: checksums, expected: nil, condition: nil, of: path)
        }
        #expect(refused?.code == .corruptData, "\(String(describing: refused))")
        #expect(try await backend.head(path) == nil)
        // The upload is still there, its parts whole: the next upload completes it.
        let outcome = try await backend.putMultipart(file, size: Int64(size), at: path, condition: nil)
        #expect(outcome.uploadID == id)
        #expect(outcome.partsKept == ranges.count)
        #expect(try await scratch.download(backend, path.identifier, version: nil) == data)
        await backend.close()
    }

    /// A scripted multipart exchange (``ContentCheckTests/multipartServer(partETag:complete:)``)
    /// whose completion answers with the right ETag and the composite checksum `checksum`.
    /// `pending` is an upload of the same key already in progress, started with the algorithm
    /// `pending` names.
    static func scriptedServer(file: Data, pending: String? = nil, checksum: @escaping @Sendable (String) -> String) throws
        -> FaultServer
    {
        let etag = MultipartTests.multipartETag(file, partSize: 5 << 20)
        let composite = compositeSHA256(file, partSize: 5 << 20)
        return try FaultServer { request in
            if request.path == "/bkt" && request.query["list-type"] == "2" {
                return HostileServerTests.ok(HostileServerTests.listing(prefix: request.query["prefix"] ?? ""))
            }
            if request.path == "/bkt" && request.query["uploads"] != nil {
                let upload =
                    pending.map {
                        "<Upload><Key>big.bin</Key><UploadId>old-1</UploadId><Initiated>\(ISO8601DateFormatter().string(from: Date()))</Initiated><ChecksumAlgorithm>\($0)</ChecksumAlgorithm></Upload>"
                    } ?? ""
                return HostileServerTests.ok(
                    Data("<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>\(upload)</ListMultipartUploadsResult>".utf8))
            }
            if request.method == "POST" && request.query["uploads"] != nil {
                return HostileServerTests.ok(
                    Data("<InitiateMultipartUploadResult><UploadId>up-1</UploadId></InitiateMultipartUploadResult>".utf8))
            }
            if request.method == "GET" && request.query["uploadId"] != nil {
                return HostileServerTests.ok(Data("<ListPartsResult><IsTruncated>false</IsTruncated></ListPartsResult>".utf8))
            }
            if request.method == "PUT" && request.query["partNumber"] != nil {
                let md5 = Data(base64Encoded: request.headers["content-md5"] ?? "").map { FileDigests.hex(Array($0)) } ?? ""
                return .reply(status: 200, headers: ["ETag": "\"\(md5)\""], body: Data())
            }
            if request.method == "POST" && request.query["uploadId"] != nil {
                return HostileServerTests.ok(
                    Data(
                        "<CompleteMultipartUploadResult><ETag>\"\(etag)\"</ETag><ChecksumSHA256>\(checksum(composite))</ChecksumSHA256></CompleteMultipartUploadResult>"
                            .utf8))
            }
            if request.method == "DELETE" { return .reply(status: 204, headers: [:], body: Data()) }
            return .reply(status: 404, headers: [:], body: Data())
        }
    }

    static func scriptedBackend(_ server: FaultServer) async throws -> S3Backend {
        try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil),
            http: HTTPOptionsForTests.quick, multipart: MultipartTests.settings)
    }

    @Test func theUploadAsksForSHA256AndEachPartSendsItsOwn() async throws {
        let scratch = try MultipartTests.Scratch()
        let (file, data) = try scratch.file("big", size: 12 << 20, seed: 10)
        let server = try Self.scriptedServer(file: data, checksum: { "\($0)-3" })
        defer { server.stop() }
        let backend = try await Self.scriptedBackend(server)
        let outcome = try await backend.putMultipart(file, size: 12 << 20, at: try ItemPath(ItemIdentifier("big.bin")), condition: nil)
        #expect(outcome.partsSent == 3)
        let create = try #require(server.requests.first { $0.method == "POST" && $0.query["uploads"] != nil })
        #expect(create.headers["x-amz-checksum-algorithm"] == "SHA256")
        for part in server.requests where part.method == "PUT" && part.query["partNumber"] != nil {
            let number = try #require(part.query["partNumber"].flatMap { Int($0) })
            let bytes = data[((number - 1) * (5 << 20))..<min(data.count, number * (5 << 20))]
            #expect(part.headers["x-amz-checksum-sha256"] == Data(Self.sha256(bytes)).base64EncodedString(), "part \(number)")
        }
        await backend.close()
    }

    /// An upload of the key started with another checksum algorithm (AWS refuses a SHA-256 on
    /// its parts) is aborted, never resumed; one started with SHA-256 is resumed.
    @Test(arguments: ["CRC32", "SHA256"])
    func anUploadStartedWithAnotherAlgorithmIsAbortedNotResumed(_ algorithm: String) async throws {
        let scratch = try MultipartTests.Scratch()
        let (file, data) = try scratch.file("big", size: 12 << 20, seed: 12)
        let server = try Self.scriptedServer(file: data, pending: algorithm, checksum: { "\($0)-3" })
        defer { server.stop() }
        let backend = try await Self.scriptedBackend(server)
        let outcome = try await backend.putMultipart(file, size: 12 << 20, at: try ItemPath(ItemIdentifier("big.bin")), condition: nil)
        let aborted = server.requests.contains { $0.method == "DELETE" && $0.query["uploadId"] == "old-1" }
        let created = server.requests.contains { $0.method == "POST" && $0.query["uploads"] != nil }
        if algorithm == "SHA256" {
            #expect(outcome.uploadID == "old-1")
            #expect(!aborted && !created)
        } else {
            #expect(outcome.uploadID == "up-1")
            #expect(aborted && created)
        }
        await backend.close()
    }

    @Test func aCompositeChecksumOfOtherPartsIsRefused() async throws {
        let scratch = try MultipartTests.Scratch()
        let (file, data) = try scratch.file("big", size: 12 << 20, seed: 11)
        let other = Data(Self.sha256(Data("other".utf8))).base64EncodedString()
        let server = try Self.scriptedServer(file: data, checksum: { _ in "\(other)-3" })
        defer { server.stop() }
        let backend = try await Self.scriptedBackend(server)
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.putMultipart(file, size: 12 << 20, at: try ItemPath(ItemIdentifier("big.bin")), condition: nil)
        }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("other parts than those sent (checksum") == true, "\(error?.message ?? "")")
        await backend.close()
    }

    /// A download of an object uploaded in parts is not checked against a composite checksum
    /// given without its `-N` (moto 5.2.1), but is against one `x-amz-checksum-type` says is of
    /// the whole object.
    @Test func aMultipartObjectsChecksumIsCheckedOnlyWhenItIsOfTheWholeObject() async throws {
        let contents = Data("the bytes the store should hold\n".utf8)
        let other = Data(Self.sha256(Data("other".utf8))).base64EncodedString()
        let whole = Data(Self.sha256(contents)).base64EncodedString()
        let tag = "\"\(FileDigests.hex(FileDigests.md5(of: Array("parts".utf8))))-2\""
        let (backend, server) = try await HostileServerTests.backend(
            root: { _ in HostileServerTests.ok(HostileServerTests.listing(prefix: "")) },
            other: { request in
                switch request.path {
                case "/bkt/composite.bin":
                    return .reply(status: 200, headers: ["ETag": tag, "x-amz-checksum-sha256": other], body: contents)
                case "/bkt/whole.bin":
                    return .reply(
                        status: 200, headers: ["ETag": tag, "x-amz-checksum-sha256": whole, "x-amz-checksum-type": "FULL_OBJECT"],
                        body: contents)
                case "/bkt/damaged.bin":
                    return .reply(
                        status: 200, headers: ["ETag": tag, "x-amz-checksum-sha256": other, "x-amz-checksum-type": "FULL_OBJECT"],
                        body: contents)
                default: return .reply(status: 404, headers: [:], body: Data())
                }
            })
        defer { server.stop() }
        let scratch = try MultipartTests.Scratch()
        #expect(try await scratch.download(backend, ItemIdentifier("composite.bin"), version: nil) == contents)
        #expect(try await scratch.download(backend, ItemIdentifier("whole.bin"), version: nil) == contents)
        let damaged = await #expect(throws: FileProviderError.self) {
            try await scratch.download(backend, ItemIdentifier("damaged.bin"), version: nil)
        }
        #expect(damaged?.code == .corruptData)
        #expect(damaged?.message.contains("x-amz-checksum-sha256") == true, "\(damaged?.message ?? "")")
        await backend.close()
    }
}
