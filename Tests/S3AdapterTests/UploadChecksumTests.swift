import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// What a single `PutObject` sends so that the store can refuse bytes damaged on the way:
/// `x-amz-checksum-sha256`, the base64 SHA-256 of the file (beside `Content-MD5`). SeaweedFS
/// checks it: a body that does not match is refused (`BadDigest`, `corruptData`) and nothing is
/// stored. (moto 5.2.1 does not check it; Docs/Reliability.md, "Content hashes".)
@Suite("S3 uploads send their SHA-256")
struct UploadChecksumTests {
    static let contents = Data("the bytes the store should hold\n".utf8)

    static func base64SHA256(_ data: Data) -> String {
        var digest = SHA256Digest()
        data.withUnsafeBytes { digest.update($0) }
        return Data(digest.finishBytes()).base64EncodedString()
    }

    static func base64MD5(_ data: Data) -> String { Data(FileDigests.md5(of: Array(data))).base64EncodedString() }

    @Test func aSinglePutSendsTheSHA256OfItsBytes() async throws {
        let (backend, server) = try await HostileServerTests.backend(
            root: { _ in HostileServerTests.ok(HostileServerTests.listing(prefix: "")) },
            other: { request in
                let md5 = FileDigests.hex(FileDigests.md5(of: Array(Self.contents)))
                if request.method == "PUT" { return .reply(status: 200, headers: ["ETag": "\"\(md5)\""], body: Data()) }
                return .reply(status: 404, headers: [:], body: Data())
            })
        defer { server.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("s3-sha-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("up")
        try Self.contents.write(to: file)
        let template = Item.template(
            identifier: ItemIdentifier("tmp-sent"), parent: .rootContainer, filename: "sent.txt", kind: .file,
            size: Int64(Self.contents.count))
        _ = try await backend.createItem(basedOn: template, fields: [.contents], contents: file, options: [])
        let put = try #require(server.requests.first { $0.method == "PUT" && $0.path == "/bkt/sent.txt" })
        #expect(put.headers["x-amz-checksum-sha256"] == Self.base64SHA256(Self.contents))
        #expect(put.headers["content-md5"] == Self.base64MD5(Self.contents))
    }

    @Test func seaweedFSRefusesABodyThatDoesNotMatchItsSHA256() async throws {
        let backend = try await MultipartTests.backend(.seaweedfs)
        let damaged = Data("the bytes the store should hold\r".utf8)
        func put(_ name: String, body: Data) async throws(FileProviderError) {
            var request = HTTPRequest("PUT", backend.endpoint(key: backend.key(ItemPath(components: [name]))))
            request.body = .data(body, contentType: "application/octet-stream")
            // The SHA-256 of the file, and the MD5 of the bytes that arrive: only the SHA-256 tells.
            request.headers = ["x-amz-checksum-sha256: \(Self.base64SHA256(Self.contents))", "Content-MD5: \(Self.base64MD5(body))"]
            try backend.check(try await backend.send(request))
        }

        try await put("whole.txt", body: Self.contents)
        #expect(try await backend.head(ItemPath(components: ["whole.txt"]))?.size == Int64(Self.contents.count))

        let refused = await #expect(throws: FileProviderError.self) { try await put("damaged.txt", body: damaged) }
        #expect(refused?.code == .corruptData)
        #expect(refused?.message.contains("damaged on the way") == true, "\(refused?.message ?? "")")
        #expect(try await backend.head(ItemPath(components: ["damaged.txt"])) == nil)
    }
}
