import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// The `.spool(path:limit:)` sink: a reply streamed into a file and never kept in memory, a
/// longer one than the limit refused, one cut off asked for again from its first byte.
@Suite struct SpoolSinkTests {
    static let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })

    static func send(_ server: FaultServer, limit: Int64, retries: Int = 0) async throws -> (HTTPReply?, FileProviderError?, Data) {
        let folder = try TemporaryFolder()
        let path = folder.url.appendingPathComponent("spool").path
        var settings = HTTPOptions(connectTimeout: 5, timeout: 5, connections: 1, retries: retries).clientSettings(baseURL: server.url)
        settings.backoff = 0.01
        let client = try HTTPClient(settings: settings)
        defer { client.close() }
        var request = HTTPRequest("PROPFIND", "/list")
        request.sink = .spool(path: path, limit: limit)
        do {
            let reply = try await client.send(request, cancellation: CancellationFlag())
            return (reply, nil, (try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data())
        } catch {
            return (nil, error, Data())
        }
    }

    @Test func aReplyGoesToTheFileNotToMemory() async throws {
        let server = try FaultServer { _ in .reply(status: 207, headers: [:], body: Self.body) }
        defer { server.stop() }
        let (reply, error, file) = try await Self.send(server, limit: 1 << 20)
        #expect(error == nil)
        #expect(reply?.body.isEmpty == true)
        #expect(reply?.fileLength == Int64(Self.body.count))
        #expect(file == Self.body)
    }

    @Test func aLongerReplyThanTheLimitIsCorruptData() async throws {
        let server = try FaultServer { _ in .reply(status: 207, headers: [:], body: Self.body) }
        defer { server.stop() }
        let (_, error, _) = try await Self.send(server, limit: 100_000)
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("larger than 100000 bytes") == true, "\(String(describing: error))")
    }

    @Test func aReplyCutOffIsAskedForAgainFromTheStart() async throws {
        let steps = StepCounter()
        let server = try FaultServer { _ in
            steps.next() == 0 ? .truncate(body: Self.body, sent: 200_000, status: 207) : .reply(status: 207, headers: [:], body: Self.body)
        }
        defer { server.stop() }
        let (reply, error, file) = try await Self.send(server, limit: 1 << 20, retries: 1)
        #expect(error == nil)
        #expect(reply?.attempts == 2)
        #expect(file == Self.body)
        #expect(server.requests.count == 2)
        #expect(server.requests.allSatisfy { $0.headers["range"] == nil })
    }
}
