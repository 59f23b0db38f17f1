import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// A reply's head and body as the kit parses them byte by byte: header names lower-cased,
/// values without the blanks around them; a body streamed
/// into a file whole whether it is smaller or larger than the buffer the client keeps for it,
/// or has no announced length; a longer file already there cut to the reply.
@Suite struct ReplyParsingTests {
    /// Downloads `/file` into a file holding `before` (none when `nil`).
    static func download(_ server: FaultServer, over before: Data? = nil) async throws -> (HTTPReply, Data) {
        let folder = try TemporaryFolder()
        let path = folder.url.appendingPathComponent("body").path
        if let before { try before.write(to: URL(fileURLWithPath: path)) }
        let settings = HTTPOptions(connectTimeout: 5, timeout: 5, connections: 1, retries: 0).clientSettings(baseURL: server.url)
        let client = try HTTPClient(settings: settings)
        defer { client.close() }
        var request = HTTPRequest("GET", "/file")
        request.sink = .file(path: path, offset: 0)
        let reply = try await client.send(request, cancellation: CancellationFlag())
        return (reply, try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test func headerNamesAreLowerCasedAndValuesTrimmed() async throws {
        let server = try FaultServer { _ in
            .raw(
                status: 200,
                headers: [
                    ("Content-Length", "3"), ("ETag", "\"Abc-1\""), ("X-Amz-Meta-Note", " \t padded  value \t"),
                    ("X-EMPTY", ""), ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"),
                ],
                body: Data("abc".utf8))
        }
        defer { server.stop() }
        let (reply, body) = try await Self.download(server)
        #expect(reply.status == 200)
        #expect(body == Data("abc".utf8))
        #expect(reply.head["etag"] == "\"Abc-1\"")
        #expect(reply.head["x-amz-meta-note"] == "padded  value")
        #expect(reply.head["x-empty"] == "")
        #expect(reply.head["last-modified"] == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(reply.head["ETag"] == nil)
        #expect(reply.head.headers.keys.allSatisfy { $0 == $0.lowercased() })
    }

    @Test(arguments: [0, 1, 4096, (1 << 20) + (64 << 10) + 1, 3 << 20])
    func aBodyOfAnySizeIsStoredWhole(_ size: Int) async throws {
        let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 9) })
        let server = try FaultServer { _ in .reply(status: 200, headers: [:], body: bytes) }
        defer { server.stop() }
        let (reply, body) = try await Self.download(server)
        #expect(reply.fileLength == Int64(size))
        #expect(body == bytes)
    }

    @Test func aBodyWithoutALengthIsStoredWhole() async throws {
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        // No Content-Length: the body ends when the server closes the connection.
        let server = try FaultServer { _ in .raw(status: 200, headers: [("Connection", "close")], body: bytes) }
        defer { server.stop() }
        let (reply, body) = try await Self.download(server)
        #expect(reply.fileLength == Int64(bytes.count))
        #expect(body == bytes)
    }

    /// A file the sink already holds is cut to the reply (a new, empty one is left as it is).
    @Test(arguments: [0, 2, 10_000])
    func aLongerFileIsCutToTheReply(_ lengthBefore: Int) async throws {
        let server = try FaultServer { _ in .reply(status: 200, headers: [:], body: Data("abc".utf8)) }
        defer { server.stop() }
        let (reply, body) = try await Self.download(server, over: Data(repeating: 0x78, count: lengthBefore))
        #expect(reply.fileLength == 3)
        #expect(body == Data("abc".utf8))
    }
}
