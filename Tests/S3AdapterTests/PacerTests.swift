import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// A store that says `SlowDown` (`503`, or `429`) with `Retry-After`: the backend waits as it
/// is told and tries again, a bounded number of times, then fails with `serverUnreachable`
/// naming the store's reason.
@Suite("S3 backing off a store that says SlowDown")
struct PacerTests {
    static let slowDown = Data(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
            .utf8)

    @Test func slowDownWithRetryAfterIsWaitedOutThenTheRequestGoesThrough() async throws {
        let asked = StepCounter()
        let server = try FaultServer { request in
            if request.path == "/bkt" && request.query["list-type"] == "2" {
                return HostileServerTests.ok(HostileServerTests.listing(prefix: request.query["prefix"] ?? ""))
            }
            if request.path == "/bkt/busy.txt" {
                let attempt = asked.next()
                if attempt == 0 { return .reply(status: 503, headers: ["Retry-After": "1"], body: Self.slowDown) }
                if attempt == 1 { return .reply(status: 429, headers: ["Retry-After": "1"], body: Data()) }
                return .reply(status: 200, headers: ["ETag": "\"e1\""], body: Data("hello".utf8))
            }
            return .reply(status: 404, headers: [:], body: Data())
        }
        defer { server.stop() }
        let backend = try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil),
            http: HTTPOptions(connectTimeout: 5, timeout: 5, connections: 2, retries: 3))
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("s3-pacer-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: destination) }
        let started = Date()
        let item = try await backend.fetchContents(
            for: ItemIdentifier("busy.txt"), version: nil, to: destination, offset: 0, progress: nil)
        let waited = Date().timeIntervalSince(started)
        #expect(item.size == 5)
        #expect(try Data(contentsOf: destination) == Data("hello".utf8))
        let heads = server.requests.filter { $0.path == "/bkt/busy.txt" }
        #expect(heads.count == 3)
        #expect(waited >= 2, "two Retry-After: 1 replies were waited out in \(waited) s")
        await backend.close()
    }

    @Test func aStoreThatNeverStopsSayingSlowDownFailsAfterTheRetries() async throws {
        let server = try FaultServer { request in
            if request.path == "/bkt" && request.query["list-type"] == "2" && request.query["max-keys"] == "1" {
                return HostileServerTests.ok(HostileServerTests.listing(prefix: request.query["prefix"] ?? ""))
            }
            return .reply(status: 503, headers: ["Retry-After": "0"], body: Self.slowDown)
        }
        defer { server.stop() }
        let backend = try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil),
            http: HTTPOptions(connectTimeout: 5, timeout: 5, connections: 2, retries: 2))
        let error = await #expect(throws: FileProviderError.self) { try await backend.listAllItems(in: .rootContainer) }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("SlowDown") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("3 attempts") == true, "\(error?.message ?? "")")
        #expect(server.requests.filter { $0.query["max-keys"] == "1000" }.count == 3)
        await backend.close()
    }
}

extension PacerTests {
    /// When the time one request got `SlowDown` and another request's arrival are recorded.
    final class Times: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [String: Date] = [:]
        subscript(name: String) -> Date? {
            get { lock.withLock { values[name] } }
            set { lock.withLock { values[name] = newValue } }
        }
    }

    @Test func aSlowDownHoldsBackTheBackendsOtherRequestsToo() async throws {
        let times = Times()
        let asked = StepCounter()
        let (refusals, refused) = AsyncStream<Void>.makeStream()
        let server = try FaultServer { request in
            if request.path == "/bkt" && request.query["list-type"] == "2" {
                return HostileServerTests.ok(HostileServerTests.listing(prefix: request.query["prefix"] ?? ""))
            }
            if request.path == "/bkt/first.txt" {
                if asked.next() == 0 {
                    times["refused"] = Date()
                    refused.yield()
                    return .reply(status: 503, headers: ["Retry-After": "2"], body: Self.slowDown)
                }
                return .reply(status: 200, headers: ["ETag": "\"e1\""], body: Data("first".utf8))
            }
            if request.path == "/bkt/second.txt" {
                times["second"] = times["second"] ?? Date()
                return .reply(status: 200, headers: ["ETag": "\"e2\""], body: Data("second".utf8))
            }
            return .reply(status: 404, headers: [:], body: Data())
        }
        defer { server.stop() }
        let backend = try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil),
            http: HTTPOptions(connectTimeout: 5, timeout: 5, connections: 1, retries: 2))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("s3-pacer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        func fetch(_ name: String) async throws -> Data {
            let destination = folder.appendingPathComponent(name)
            _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
            _ = try await backend.fetchContents(for: ItemIdentifier(name), version: nil, to: destination, offset: 0, progress: nil)
            return try Data(contentsOf: destination)
        }

        async let first = fetch("first.txt")
        var iterator = refusals.makeAsyncIterator()
        _ = await iterator.next()
        // The first request is being told to slow down (on the one connection): the second,
        // started now, waits as long.
        #expect(try await fetch("second.txt") == Data("second".utf8))
        #expect(try await first == Data("first".utf8))
        let refusedAt = try #require(times["refused"])
        let secondAt = try #require(times["second"])
        #expect(
            secondAt.timeIntervalSince(refusedAt) >= 1.9,
            "the second request came \(secondAt.timeIntervalSince(refusedAt)) s after the SlowDown")
        await backend.close()
    }
}
