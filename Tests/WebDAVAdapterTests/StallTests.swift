import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing
import WebDAVAdapter

/// A server that stops sending in the middle of a body, or never answers at all: the transfer
/// is given up once no byte moved for the backend's `timeout`, with an error that says so, and
/// nothing partial is ever taken for a complete file. Without the timeout these tests would
/// wait forever (the time limit ends them then).
@Suite("WebDAV stalls", .timeLimit(.minutes(5)))
struct StallTests {
    static let data = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    static let headers = ["ETag": "\"e1\"", "Last-Modified": ScriptedDAV.date]
    static let version = ItemVersion(content: Data("e\"e1\"".utf8), metadata: Data())
    /// The most seconds one attempt with a 1 s timeout may take: what ends it is the timeout
    /// (its message says so), not how fast a loaded machine runs the test; far less than the
    /// time limit, which is what a transfer without the timeout would meet. (Alone an attempt
    /// takes 1-2 s; beside the whole suite's 637 tests and their servers one took 22 s.)
    static let bound = 120.0

    /// A collection with one file, `blob`, whose `GET` (ranged or not) gets `fault`; other
    /// requests get `other` when given.
    static func server(
        get fault: FaultServer.Action, other: ((FaultServer.Request) -> FaultServer.Action?)? = nil
    ) throws -> FaultServer {
        var dav = ScriptedDAV()
        dav.entries = [ScriptedDAV.file("blob", size: data.count)]
        return try ScriptedDAV.server { request in
            if request.method == "GET" { return fault }
            if let action = other?(request) { return action }
            return dav.answer(request) ?? .reply(status: 404, headers: [:], body: Data())
        }
    }

    /// Runs `body` and returns the error it threw and the seconds it took.
    static func failure(_ body: () async throws -> Void) async -> (FileProviderError?, Double) {
        let start = ContinuousClock.now
        var failure: FileProviderError?
        do {
            try await body()
        } catch let error as FileProviderError {
            failure = error
        } catch {
            Issue.record("unexpected \(error)")
        }
        let elapsed = ContinuousClock.now - start
        return (failure, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    static func fetch(_ backend: WebDAVBackend) async -> (FileProviderError?, Double, URL) {
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-stall-\(UUID().uuidString)")
        let (error, seconds) = await failure {
            _ = try await backend.fetchContents(
                for: ItemIdentifier("blob"), version: Self.version, to: destination, offset: 0, progress: nil)
        }
        return (error, seconds, destination)
    }

    /// One attempt (no retries): given up after the 1 s timeout (libcurl calls the progress
    /// check at least once a second), not after seconds more.
    @Test(arguments: ["mid-body", "no answer"])
    func aStalledDownloadFailsWithinTheTimeout(_ fault: String) async throws {
        let action: FaultServer.Action =
            fault == "mid-body" ? .stall(body: Self.data, sent: 70_000, headers: Self.headers) : .silence
        let server = try Self.server(get: action)
        defer { server.stop() }
        let backend = try await WebDAVBackend(url: server.url + "/dav", timeout: 1, retries: 0)
        let (error, seconds, destination) = await Self.fetch(backend)
        defer { try? FileManager.default.removeItem(at: destination) }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("no byte moved for 1 s") == true, "\(String(describing: error))")
        #expect(seconds >= 1 && seconds < Self.bound, "gave up after \(seconds) s")
        // What arrived is at most the part sent: never taken for the whole file.
        let stored = (try? Data(contentsOf: destination)) ?? Data()
        #expect(stored.count <= 70_000)
        #expect(stored == Self.data.prefix(stored.count))
        #expect(server.requests.filter { $0.method == "GET" }.count == 1)
        await backend.close()
    }

    /// With retries, each attempt resumes after the bytes stored (`Range`) and stalls again:
    /// the download fails after the retries with the reason, each attempt within the timeout.
    @Test func aServerThatKeepsStallingFailsAfterTheRetries() async throws {
        let server = try Self.server(get: .stall(body: Self.data, sent: 70_000, headers: Self.headers))
        defer { server.stop() }
        let backend = try await WebDAVBackend(url: server.url + "/dav", timeout: 1, retries: 2)
        let (error, seconds, destination) = await Self.fetch(backend)
        defer { try? FileManager.default.removeItem(at: destination) }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("no byte moved for 1 s") == true, "\(String(describing: error))")
        #expect(server.requests.filter { $0.method == "GET" }.count == 3)
        #expect(seconds >= 3 && seconds < 3 * Self.bound, "gave up after \(seconds) s")
        await backend.close()
    }

    /// A listing or an upload the server never answers fails the same way.
    @Test func anUnansweredListingOrUploadFailsWithinTheTimeout() async throws {
        let server = try Self.server(
            get: .silence,
            other: { request in
                if request.method == "PROPFIND", request.headers["depth"] == "1" { return .silence }
                if request.method == "PUT", !request.path.hasPrefix("/dav/.fileprovider-probe-") { return .silence }
                return nil
            })
        defer { server.stop() }
        let backend = try await WebDAVBackend(url: server.url + "/dav", timeout: 1, retries: 0)
        let (listing, listingSeconds) = await Self.failure {
            _ = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        }
        #expect(listing?.code == .serverUnreachable, "\(String(describing: listing))")
        #expect(listingSeconds < Self.bound)
        let source = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-stall-up-\(UUID().uuidString)")
        try Data(repeating: 1, count: 1000).write(to: source)
        defer { try? FileManager.default.removeItem(at: source) }
        let template = Item(identifier: ItemIdentifier("new.bin"), parentIdentifier: .rootContainer, filename: "new.bin", kind: .file)
        let (upload, uploadSeconds) = await Self.failure {
            _ = try await backend.createItem(basedOn: template, fields: [], contents: source, options: [])
        }
        #expect(upload?.code == .serverUnreachable, "\(String(describing: upload))")
        #expect(upload?.message.contains("no byte moved for 1 s") == true, "\(String(describing: upload))")
        #expect(uploadSeconds < Self.bound)
        await backend.close()
    }

    /// Through the engine: a stalled download (or one cut short every time) leaves the
    /// placeholder and no file under the real name, and the item is not recorded as downloaded.
    @Test(arguments: ["mid-body", "no answer", "cut short"])
    func aStalledMaterializeLeavesOnlyThePlaceholder(_ fault: String) async throws {
        let action: FaultServer.Action
        switch fault {
        case "mid-body": action = .stall(body: Self.data, sent: 70_000, headers: Self.headers)
        case "no answer": action = .silence
        default: action = .truncate(body: Self.data, sent: 70_000, headers: Self.headers)
        }
        let server = try Self.server(get: action)
        defer { server.stop() }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-stall-engine-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let home = scratch.appendingPathComponent("home")
        let manager = try ProviderManager(home: home, registry: BackendRegistry([WebDAVBackend.descriptor]))
        try await manager.addDomain(
            name: "stalling", kind: "webdav",
            options: ["url": server.url + "/dav", "timeout": "1", "retries": "1", "connections": "1"])
        let controller = try await manager.controller(for: "stalling")
        _ = try await controller.sync()
        let outcomes = await controller.materialize(paths: ["blob"], recursive: false)
        let error = try #require(outcomes.first?.error)
        #expect(error.code == .serverUnreachable, "\(error)")
        let replica = home.appendingPathComponent("domains/stalling")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("blob").path))
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("blob.placeholder").path))
        let entry = try #require(try controller.list(at: "", recursive: false).first { $0.path == "blob" })
        #expect(entry.state == .placeholder)
        #expect(entry.localContentVersion == nil)
        await manager.close()
    }
}
