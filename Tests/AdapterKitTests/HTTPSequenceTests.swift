import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// ``HTTPClient/sendSequence(_:cancellation:)``: requests one after another on one connection,
/// every final answer given back, the rest left to ``HTTPClient/send(_:cancellation:)`` from
/// the first that needs a retry.
@Suite struct HTTPSequenceTests {
    static func client(_ server: FaultServer, connections: Int) throws -> HTTPClient {
        var settings = HTTPOptions(connectTimeout: 5, timeout: 5, connections: connections, retries: 2).clientSettings(baseURL: server.url)
        settings.backoff = 0.01
        return try HTTPClient(settings: settings)
    }

    @Test func theRequestsGoInOrderOnOneConnectionUntilOneNeedsARetry() async throws {
        let server = try FaultServer { request in
            switch request.path {
            case "/gone": .reply(status: 404, headers: [:], body: Data("no".utf8))
            case "/busy": .reply(status: 503, headers: [:], body: Data())
            default: .reply(status: 200, headers: [:], body: Data(request.path.utf8))
            }
        }
        defer { server.stop() }
        let client = try Self.client(server, connections: 4)
        defer { client.close() }
        let paths = ["/a", "/gone", "/b", "/busy", "/c"]
        let replies = await client.sendSequence(paths.map { HTTPRequest("GET", $0) }, cancellation: CancellationFlag())
        #expect(replies.count == 5)
        #expect(replies[0]?.status == 200 && replies[0]?.body == Data("/a".utf8))
        #expect(replies[1]?.status == 404, "a final answer, whatever it is, is given back")
        #expect(replies[2]?.body == Data("/b".utf8))
        #expect(replies[3] == nil && replies[4] == nil, "from the 503 on, left to send(_:cancellation:)")
        let seen = server.requests
        #expect(seen.map(\.path) == ["/a", "/gone", "/b", "/busy"], "nothing sent after the 503")
        #expect(Set(seen.map(\.connection)).count == 1, "one connection: \(seen.map(\.connection))")
    }

    @Test func aCancelledSequenceSendsNothing() async throws {
        let server = try FaultServer { _ in .reply(status: 200, headers: [:], body: Data()) }
        defer { server.stop() }
        let client = try Self.client(server, connections: 1)
        defer { client.close() }
        let flag = CancellationFlag()
        flag.cancel()
        let replies = await client.sendSequence([HTTPRequest("GET", "/a"), HTTPRequest("GET", "/b")], cancellation: flag)
        #expect(replies.count == 2 && replies.allSatisfy { $0 == nil })
        #expect(server.requests.isEmpty)
    }
}
