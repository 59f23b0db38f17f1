import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// MD5 checks of what goes up and comes down, against the scripted hostile server: an upload
/// sends `Content-MD5` and refuses an ETag that names other bytes; a download whose ETag is a
/// plain MD5 is checked against it (but not under SSE-KMS, whose ETags are no MD5).
@Suite("S3 content checks against a hostile server")
struct ContentCheckTests {
    static let contents = Data("the bytes the store should hold\n".utf8)
    static let md5 = FileDigests.hex(FileDigests.md5(of: Array(contents)))
    static let otherMD5 = FileDigests.hex(FileDigests.md5(of: Array("other".utf8)))

    static func scratch() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("s3-checks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test func anUploadSendsItsMD5AndRefusesAnETagOfOtherBytes() async throws {
        let (backend, server) = try await HostileServerTests.backend(
            root: { _ in HostileServerTests.ok(HostileServerTests.listing(prefix: "")) },
            other: { request in
                if request.method == "PUT" && request.path == "/bkt/good.txt" {
                    return .reply(status: 200, headers: ["ETag": "\"\(Self.md5)\""], body: Data())
                }
                if request.method == "PUT" && request.path == "/bkt/lied.txt" {
                    return .reply(status: 200, headers: ["ETag": "\"\(Self.otherMD5)\""], body: Data())
                }
                return .reply(status: 404, headers: [:], body: Data())
            })
        defer { server.stop() }
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("up")
        try Self.contents.write(to: file)
        func template(_ name: String) -> Item {
            Item.template(
                identifier: ItemIdentifier("tmp-\(name)"), parent: .rootContainer, filename: name, kind: .file,
                size: Int64(Self.contents.count))
        }

        let good = try await backend.createItem(basedOn: template("good.txt"), fields: [.contents], contents: file, options: [])
        #expect(good.item.version.content == Data(Self.md5.utf8))
        let put = try #require(server.requests.first { $0.method == "PUT" && $0.path == "/bkt/good.txt" })
        #expect(put.headers["content-md5"] == Data(FileDigests.md5(of: Array(Self.contents))).base64EncodedString())
        #expect(put.headers["x-amz-checksum-sha256"] != nil)

        let lied = await #expect(throws: FileProviderError.self) {
            try await backend.createItem(basedOn: template("lied.txt"), fields: [.contents], contents: file, options: [])
        }
        #expect(lied?.code == .corruptData)
        #expect(lied?.message.contains("other bytes") == true, "\(lied?.message ?? "")")
    }

    @Test func aDownloadIsCheckedAgainstAPlainMD5ETag() async throws {
        let (backend, server) = try await HostileServerTests.backend(
            root: { _ in HostileServerTests.ok(HostileServerTests.listing(prefix: "")) },
            other: { request in
                switch request.path {
                case "/bkt/good.txt": return .reply(status: 200, headers: ["ETag": "\"\(Self.md5)\""], body: Self.contents)
                case "/bkt/damaged.txt": return .reply(status: 200, headers: ["ETag": "\"\(Self.otherMD5)\""], body: Self.contents)
                case "/bkt/kms.txt":
                    return .reply(
                        status: 200, headers: ["ETag": "\"\(Self.otherMD5)\"", "x-amz-server-side-encryption": "aws:kms"],
                        body: Self.contents)
                case "/bkt/parts.txt": return .reply(status: 200, headers: ["ETag": "\"\(Self.otherMD5)-3\""], body: Self.contents)
                default: return .reply(status: 404, headers: [:], body: Data())
                }
            })
        defer { server.stop() }
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        func fetch(_ name: String) async throws -> Data {
            let destination = folder.appendingPathComponent(name)
            _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
            _ = try await backend.fetchContents(for: ItemIdentifier(name), version: nil, to: destination, offset: 0, progress: nil)
            return try Data(contentsOf: destination)
        }

        #expect(try await fetch("good.txt") == Self.contents)
        let damaged = await #expect(throws: FileProviderError.self) { try await fetch("damaged.txt") }
        #expect(damaged?.code == .corruptData)
        #expect(damaged?.message.contains("MD5") == true, "\(damaged?.message ?? "")")
        // Not an MD5 of the bytes: an SSE-KMS object's ETag, a multipart upload's.
        #expect(try await fetch("kms.txt") == Self.contents)
        #expect(try await fetch("parts.txt") == Self.contents)
    }
}

extension ContentCheckTests {
    /// A batch download (``S3Backend/fetchContents(_:progress:)``) sends its `GET`s one after
    /// another on one connection and checks every object as a single download does: the one
    /// whose bytes do not match its MD5 ETag fails alone, the missing one fails as it does
    /// alone, the others come whole.
    @Test func aBatchDownloadGoesOnOneConnectionAndChecksEveryObject() async throws {
        let (backend, server) = try await HostileServerTests.backend(
            root: { _ in HostileServerTests.ok(HostileServerTests.listing(prefix: "")) },
            other: { request in
                switch request.path {
                case "/bkt/good.txt", "/bkt/also.txt": return .reply(status: 200, headers: ["ETag": "\"\(Self.md5)\""], body: Self.contents)
                case "/bkt/damaged.txt": return .reply(status: 200, headers: ["ETag": "\"\(Self.otherMD5)\""], body: Self.contents)
                default: return .reply(status: 404, headers: [:], body: Data())
                }
            })
        defer { server.stop() }
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let names = ["good.txt", "damaged.txt", "missing.txt", "also.txt"]
        let wanted = names.map { name in
            let destination = folder.appendingPathComponent(name)
            _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
            return ContentRequest(identifier: ItemIdentifier(name), destination: destination)
        }
        let results = await backend.fetchContents(wanted, progress: nil)
        let alone = await #expect(throws: FileProviderError.self) {
            _ = try await backend.fetchContents(
                for: "missing.txt", version: nil, to: folder.appendingPathComponent("alone"), offset: 0, progress: nil)
        }
        func code(_ result: Result<Item, FileProviderError>) -> FileProviderError.Code? {
            if case .failure(let error) = result { return error.code }
            return nil
        }
        #expect((try? results[0].get())?.size == Int64(Self.contents.count))
        #expect(try Data(contentsOf: wanted[0].destination) == Self.contents)
        #expect(code(results[1]) == .corruptData, "\(results[1])")
        #expect(code(results[2]) == alone?.code, "\(results[2])")
        #expect(try Data(contentsOf: wanted[3].destination) == Self.contents && (try? results[3].get()) != nil)
        let gets = server.requests.filter { $0.method == "GET" && names.map { "/bkt/" + $0 }.contains($0.path) }.prefix(4)
        #expect(gets.map(\.path) == names.map { "/bkt/" + $0 })
        #expect(Set(gets.map(\.connection)).count == 1, "\(gets.map(\.connection))")
    }

    /// A scripted multipart exchange: no upload in progress, a new upload id, every part's ETag
    /// from `partETag` (given the `Content-MD5` the part was sent with), and `complete` as the
    /// object's ETag.
    static func multipartServer(partETag: @escaping @Sendable (String) -> String, complete: String) throws -> FaultServer {
        try FaultServer { request in
            if request.path == "/bkt" && request.query["list-type"] == "2" {
                return HostileServerTests.ok(HostileServerTests.listing(prefix: request.query["prefix"] ?? ""))
            }
            if request.path == "/bkt" && request.query["uploads"] != nil {
                return HostileServerTests.ok(
                    Data("<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>".utf8))
            }
            if request.method == "POST" && request.query["uploads"] != nil {
                return HostileServerTests.ok(
                    Data("<InitiateMultipartUploadResult><UploadId>up-1</UploadId></InitiateMultipartUploadResult>".utf8))
            }
            if request.method == "PUT" && request.query["partNumber"] != nil {
                let md5 = Data(base64Encoded: request.headers["content-md5"] ?? "").map { FileDigests.hex(Array($0)) } ?? ""
                return .reply(status: 200, headers: ["ETag": "\"\(partETag(md5))\""], body: Data())
            }
            if request.method == "POST" && request.query["uploadId"] != nil {
                return HostileServerTests.ok(
                    Data("<CompleteMultipartUploadResult><ETag>\"\(complete)\"</ETag></CompleteMultipartUploadResult>".utf8))
            }
            if request.method == "DELETE" { return .reply(status: 204, headers: [:], body: Data()) }
            return .reply(status: 404, headers: [:], body: Data())
        }
    }

    static func bigFile(in folder: URL) throws -> URL {
        let file = folder.appendingPathComponent("big")
        try Data((0..<(12 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: file)
        return file
    }

    @Test func aPartStoredAsOtherBytesIsRefused() async throws {
        let server = try Self.multipartServer(partETag: { _ in Self.otherMD5 }, complete: "x-2")
        defer { server.stop() }
        let backend = try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil),
            http: HTTPOptionsForTests.quick, multipart: MultipartTests.settings)
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.putMultipart(
                try Self.bigFile(in: folder), size: 12 << 20, at: try ItemPath(ItemIdentifier("big.bin")), condition: nil)
        }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("was stored as other bytes") == true, "\(error?.message ?? "")")
        #expect(!server.requests.contains { $0.method == "POST" && $0.query["uploadId"] != nil }, "the upload was completed")
    }

    @Test func anObjectAssembledFromOtherPartsIsRefused() async throws {
        let server = try Self.multipartServer(partETag: { $0 }, complete: "\(Self.otherMD5)-3")
        defer { server.stop() }
        let backend = try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil),
            http: HTTPOptionsForTests.quick, multipart: MultipartTests.settings)
        let folder = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.putMultipart(
                try Self.bigFile(in: folder), size: 12 << 20, at: try ItemPath(ItemIdentifier("big.bin")), condition: nil)
        }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("other parts than those sent") == true, "\(error?.message ?? "")")
        #expect(server.requests.filter { $0.method == "PUT" && $0.query["partNumber"] != nil }.count == 3)
    }
}
