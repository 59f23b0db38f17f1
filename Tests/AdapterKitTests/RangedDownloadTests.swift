import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// `RangedDownload` and its `.firstRange` sink on the kit's client, with small ranges: a file
/// of at most the first range comes in one request, a larger one in ranges at their places, a
/// server that ignores `Range` in one `200`, and a `200` cut off past the first range is asked
/// for the rest.
@Suite("Ranged downloads in the kit")
struct RangedDownloadTests {
    static let body = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
    static let files = BlockingExecutor(name: "ranged-test", threads: 1)

    /// A server that honours `Range: bytes=a-b` on `body` (`206`), or answers with `fault` when
    /// it gives an action for the request and its first byte.
    static func server(fault: @escaping (FaultServer.Request, Int) -> FaultServer.Action? = { _, _ in nil }) throws -> FaultServer {
        try FaultServer { request in
            let body = Self.body
            guard let header = request.headers["range"], header.hasPrefix("bytes=") else {
                return fault(request, 0) ?? .reply(status: 200, headers: [:], body: body)
            }
            let bounds = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            let start = Int(bounds[0]) ?? 0
            let last = min(body.count - 1, Int(bounds[1]) ?? body.count - 1)
            return fault(request, start)
                ?? .reply(
                    status: 206, headers: ["Content-Range": "bytes \(start)-\(last)/\(body.count)"],
                    body: body.subdata(in: start..<(last + 1)))
        }
    }

    static func fetch(
        _ server: FaultServer, firstRange: Int64 = 1000, threshold: Int64 = 2000, retries: Int = 0
    ) async throws -> (HTTPReply, Data) {
        let folder = try TemporaryFolder()
        let path = folder.url.appendingPathComponent("download").path
        var settings = HTTPOptions(connectTimeout: 5, timeout: 5, connections: 4, retries: retries).clientSettings(
            baseURL: server.url)
        settings.backoff = 0.01
        let client = try HTTPClient(settings: settings)
        defer { client.close() }
        var download = RangedDownload(streams: 4, files: files)
        download.firstRange = firstRange
        download.threshold = threshold
        download.rangeSize = 1000
        let reply = try await download.fetch(HTTPRequest("GET", "/file"), into: path, from: 0) { request async throws(FileProviderError) in
            try await client.send(request, cancellation: CancellationFlag())
        }
        return (reply, try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// One stream per core for a server elsewhere (at least two), one per two cores for one on
    /// this machine, at most the connections.
    @Test func streamsFollowTheProcessorsAndWhereTheServerIs() {
        #expect(RangedDownload.streams(connections: 8, url: "https://dav.example.com/files", processors: 2) == 2)
        #expect(RangedDownload.streams(connections: 8, url: "https://dav.example.com/files", processors: 1) == 2)
        #expect(RangedDownload.streams(connections: 8, url: "https://dav.example.com", processors: 16) == 8)
        #expect(RangedDownload.streams(connections: 1, url: "https://dav.example.com", processors: 16) == 1)
        #expect(RangedDownload.streams(connections: 8, url: "http://127.0.0.1:8080/dav", processors: 2) == 1)
        #expect(RangedDownload.streams(connections: 8, url: "http://localhost/dav", processors: 8) == 4)
        #expect(RangedDownload.streams(connections: 8, url: "http://[::1]:81/", processors: 1) == 1)
        #expect(RangedDownload.isLoopback("http://127.3.4.5/"))
        #expect(!RangedDownload.isLoopback("http://127.example.com/"))
        #expect(!RangedDownload.isLoopback("http://10.0.0.1/"))
    }

    @Test func aFileNoLargerThanTheFirstRangeComesInOneRequest() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let (reply, file) = try await Self.fetch(server, firstRange: 16_000)
        #expect(reply.status == 206 && reply.fileLength == Int64(Self.body.count))
        #expect(file == Self.body)
        #expect(server.requests.map { $0.headers["range"] } == ["bytes=0-15999"])
    }

    @Test func aLargerFileComesInRangesAtTheirPlaces() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let (reply, file) = try await Self.fetch(server)
        #expect(reply.fileLength == Int64(Self.body.count))
        #expect(file == Self.body)
        let ranges = Set(server.requests.compactMap { $0.headers["range"] })
        #expect(ranges == Set((0..<10).map { "bytes=\($0 * 1000)-\($0 * 1000 + 999)" }))
    }

    /// Less than the threshold left after the first range: the rest in one request.
    @Test func aLittleLeftComesInOneMoreRequest() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let (_, file) = try await Self.fetch(server, firstRange: 9000)
        #expect(file == Self.body)
        #expect(server.requests.map { $0.headers["range"] } == ["bytes=0-8999", "bytes=9000-9999"])
    }

    @Test func aServerThatIgnoresRangeGivesItAllInOneReply() async throws {
        let server = try Self.server { _, _ in .reply(status: 200, headers: [:], body: Self.body) }
        defer { server.stop() }
        let (reply, file) = try await Self.fetch(server)
        #expect(reply.status == 200)
        #expect(file == Self.body)
        #expect(server.requests.count == 1)
    }

    /// A `200` cut off after the first range's end: the next attempt asks for the rest of the
    /// file, not for a range that ends before it starts.
    @Test func aWholeReplyCutOffPastTheFirstRangeIsAskedForTheRest() async throws {
        let steps = StepCounter()
        let server = try Self.server { _, _ in
            steps.next() == 0 ? .truncate(body: Self.body, sent: 4000) : nil
        }
        defer { server.stop() }
        let (reply, file) = try await Self.fetch(server, retries: 1)
        #expect(reply.fileLength == Int64(Self.body.count))
        #expect(file == Self.body)
        #expect(server.requests.map { $0.headers["range"] } == ["bytes=0-999", "bytes=4000-"])
    }

    /// A range answered `416` (the file got shorter meanwhile) is `versionNoLongerAvailable`,
    /// and the file is cut to the prefix written without a gap.
    @Test func aRangeThatIsGoneIsVersionNoLongerAvailable() async throws {
        let server = try Self.server { _, start in start == 5000 ? .reply(status: 416, headers: [:], body: Data()) : nil }
        defer { server.stop() }
        let folder = try TemporaryFolder()
        let path = folder.url.appendingPathComponent("download").path
        let client = try HTTPClient(settings: HTTPOptions(connections: 4, retries: 0).clientSettings(baseURL: server.url))
        defer { client.close() }
        var download = RangedDownload(streams: 4, files: Self.files)
        download.firstRange = 1000
        download.threshold = 2000
        download.rangeSize = 1000
        do {
            _ = try await download.fetch(HTTPRequest("GET", "/file"), into: path, from: 0) { request async throws(FileProviderError) in
                try await client.send(request, cancellation: CancellationFlag())
            }
            Issue.record("the download succeeded")
        } catch {
            #expect(error.code == .versionNoLongerAvailable, "\(error)")
        }
        let kept = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(kept.count >= 1000 && kept.count <= 5000, "\(kept.count)")
        #expect(kept == Self.body.prefix(kept.count))
        #expect(PrefixRecord.recorded(atPath: path) == nil)
    }
}
