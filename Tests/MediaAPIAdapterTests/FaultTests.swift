import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderEngine
import ProviderTesting
import Testing

/// Faults from a server that speaks the original API: each gives a clear error or a successful
/// retry, never a partial file under the real name.
@Suite("Faults")
struct FaultTests {
    static let data = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    /// A server whose whole-file downloads of `photo.png` follow `script`, one action per
    /// request (the last repeats); everything else answers normally.
    static func server(_ script: [FaultServer.Action?]) throws -> FaultServer {
        let api = OriginalAPI(files: ["photo.png": data])
        let counter = StepCounter()
        return try FaultServer { request in
            let isDownload = request.path == "/file" && request.headers["range"] != "bytes=0-0"
            guard isDownload else { return api.answer(request) ?? api.full(request) }
            let step = counter.next()
            let action = script[min(step, script.count - 1)]
            return action ?? api.answer(request) ?? api.full(request)
        }
    }

    static func backend(_ server: FaultServer, retries: Int = 3, timeout: Double = 30) async throws -> MediaBackend {
        try await MediaBackend(url: server.url, token: nil, timeout: timeout, connections: 1, retries: retries)
    }

    /// Downloads photo.png into a fresh file; returns the error, if any, and the file.
    static func fetch(_ backend: MediaBackend) async throws -> (FileProviderError?, URL, Scratch) {
        let scratch = try Scratch()
        let url = try scratch.write("download.part", Data())
        do {
            _ = try await backend.fetchContents(for: "photo.png", version: nil, to: url, offset: 0, progress: nil)
            return (nil, url, scratch)
        } catch {
            return (error, url, scratch)
        }
    }

    /// A batch's downloads go one after another on one connection, without a hand-off per file;
    /// from a file the server answers `503` on, the rest of the batch is fetched alone (retried,
    /// resumed after a cut body), and a file the server does not have fails alone. Every file
    /// that came holds its bytes.
    @Test func aBatchGoesOnOneConnectionAndWhatFailsInItIsFetchedAlone() async throws {
        let names = ["a.png", "b.png", "c.png", "d.png", "e.png", "f.png"]
        var files: [String: Data] = [:]
        for (index, name) in names.enumerated() where name != "e.png" {
            files[name] = Data((0..<(1_000 + index * 10_000)).map { UInt8(truncatingIfNeeded: $0 &* (index + 3)) })
        }
        let api = OriginalAPI(files: files)
        // The handler runs under the server's lock, one request at a time.
        var faults: [String: FaultServer.Action] = [
            "c.png": .reply(status: 503, headers: [:], body: Data()),
            "d.png": .truncate(body: files["d.png"]!, sent: 5_000, headers: ["Last-Modified": OriginalAPI.lastModified]),
        ]
        let server = try FaultServer { request in
            if request.path == "/file", request.headers["range"] == nil, let fault = faults.removeValue(forKey: request.query["id"] ?? "") {
                return fault
            }
            return api.answer(request) ?? api.full(request)
        }
        defer { server.stop() }
        let backend = try await MediaBackend(url: server.url, token: nil, timeout: 30, connections: 2, retries: 3)
        let scratch = try Scratch()
        let wanted = try names.map { name in
            ContentRequest(identifier: ItemIdentifier(name), destination: try scratch.write(name + ".part", Data()))
        }
        let results = await backend.fetchContents(wanted, progress: nil)
        // The missing file fails as it does fetched alone.
        var alone: FileProviderError?
        do {
            _ = try await backend.fetchContents(
                for: "e.png", version: nil, to: try scratch.write("alone.part", Data()), offset: 0, progress: nil)
        } catch {
            alone = error as? FileProviderError
        }
        let expected = try #require(alone)
        for (name, (request, result)) in zip(names, zip(wanted, results)) {
            if name == "e.png" {
                #expect({ if case .failure(let error) = result { error.code == expected.code } else { false } }(), "\(result)")
                continue
            }
            #expect((try? result.get())?.size == Int64(files[name]!.count), "\(name): \(result)")
            #expect(try Data(contentsOf: request.destination) == files[name], "\(name)")
        }
        let downloads = server.requests.filter { $0.path == "/file" && $0.headers["range"] != "bytes=0-0" && $0.query["id"] != "e.png" }
        // The sequence: a, b, then c answered 503, on one connection, one after another.
        let first = try #require(downloads.first)
        #expect(downloads.prefix(3).map { $0.query["id"] } == ["a.png", "b.png", "c.png"])
        #expect(downloads.prefix(3).allSatisfy { $0.connection == first.connection })
        #expect(downloads.filter { $0.query["id"] == "c.png" }.count == 2, "c.png was sent again alone")
        #expect(downloads.last { $0.query["id"] == "d.png" }?.headers["range"] == "bytes=5000-", "d.png resumed after its cut body")
        await backend.close()
    }

    @Test func a500IsRetried() async throws {
        let server = try Self.server([.reply(status: 500, headers: [:], body: Data("boom".utf8)), nil])
        let backend = try await Self.backend(server)
        let (error, url, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error == nil)
        #expect(try Data(contentsOf: url) == Self.data)
        await backend.close()
    }

    @Test func a429HonoursRetryAfter() async throws {
        let server = try Self.server([.reply(status: 429, headers: ["Retry-After": "0"], body: Data()), nil])
        let backend = try await Self.backend(server)
        let (error, url, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error == nil)
        #expect(try Data(contentsOf: url) == Self.data)
        await backend.close()
    }

    @Test func persistent500sGiveAClearError() async throws {
        let server = try Self.server([.reply(status: 503, headers: [:], body: Data(#"{"error":"overloaded"}"#.utf8))])
        let backend = try await Self.backend(server, retries: 2)
        let (error, _, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("503") == true)
        #expect(error?.message.contains("overloaded") == true)
        #expect(error?.message.contains("3 attempts") == true)
        await backend.close()
    }

    @Test func aTruncatedBodyResumesWithRange() async throws {
        let server = try Self.server([.truncate(body: Self.data, sent: 40_000, headers: ["Last-Modified": OriginalAPI.lastModified]), nil])
        let backend = try await Self.backend(server)
        let (error, url, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error == nil)
        #expect(try Data(contentsOf: url) == Self.data)
        let downloads = server.requests.filter { $0.path == "/file" && $0.headers["range"] != "bytes=0-0" }
        #expect(downloads.count == 2)
        #expect(downloads.last?.headers["range"] == "bytes=40000-")
        await backend.close()
    }

    @Test func aConnectionResetIsRetried() async throws {
        let server = try Self.server([.reset, nil])
        let backend = try await Self.backend(server)
        let (error, url, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error == nil)
        #expect(try Data(contentsOf: url) == Self.data)
        await backend.close()
    }

    @Test func persistentResetsGiveAClearError() async throws {
        let server = try Self.server([.reset])
        let backend = try await Self.backend(server, retries: 2)
        let (error, _, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("after 3 attempts") == true)
        await backend.close()
    }

    /// The stalled reply never ends: without the timeout the download would wait forever (the
    /// time limit ends the test then). The stall is noticed after the timeout, not seconds later.
    @Test(.timeLimit(.minutes(3))) func aStalledTransferTimesOutAndIsRetried() async throws {
        let server = try Self.server([.stall(body: Self.data, sent: 10_000, headers: ["Last-Modified": OriginalAPI.lastModified]), nil])
        let backend = try await Self.backend(server, timeout: 1)
        let (error, url, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error == nil)
        #expect(try Data(contentsOf: url) == Self.data)
        let downloads = server.requests.filter { $0.path == "/file" && $0.headers["range"] != "bytes=0-0" }
        #expect(downloads.count == 2, "the stalled download was given up and asked for again")
        await backend.close()
    }

    @Test func aServerThatKeepsStallingGivesAClearError() async throws {
        let server = try Self.server([.stall(body: Self.data, sent: 10_000, headers: ["Last-Modified": OriginalAPI.lastModified])])
        let backend = try await Self.backend(server, retries: 1, timeout: 1)
        let (error, _, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error?.code == .serverUnreachable)
        // Our own check, which counts seconds without a byte (libcurl's low-speed limit averages
        // the last seconds and would say "Operation too slow" seconds later).
        #expect(error?.message.contains("no byte moved for 1 s") == true, "\(String(describing: error))")
        await backend.close()
    }

    @Test func refusedTokenIsNotAuthenticated() async throws {
        let server = try Self.server([.reply(status: 401, headers: [:], body: Data(#"{"error":"who are you"}"#.utf8))])
        let backend = try await Self.backend(server)
        let (error, _, scratch) = try await Self.fetch(backend)
        defer { withExtendedLifetime(scratch) {} }
        #expect(error?.code == .notAuthenticated)
        #expect(server.requests.filter { $0.path == "/file" }.count == 1)
        await backend.close()
    }

    /// Through the engine: a failed download never leaves a file under the real name.
    @Test(arguments: ["truncated", "reset", "500"])
    func failedMaterializeLeavesOnlyThePlaceholder(_ fault: String) async throws {
        let action: FaultServer.Action
        switch fault {
        case "truncated": action = .truncate(body: Self.data, sent: 50_000, headers: ["Last-Modified": OriginalAPI.lastModified])
        case "reset": action = .reset
        default: action = .reply(status: 500, headers: [:], body: Data())
        }
        // Every attempt fails, ranged resumes included.
        let api = OriginalAPI(files: ["photo.png": Self.data])
        let server = try FaultServer { request in
            if request.path == "/file" && request.headers["range"] != "bytes=0-0" { return action }
            return api.answer(request) ?? api.full(request)
        }
        let engine = try Engine()
        try await engine.manager.addDomain(
            name: "faulty", kind: "media", options: ["url": server.url, "connections": "1", "retries": "1"])
        let controller = try await engine.manager.controller(for: "faulty")
        _ = try await controller.sync()
        let outcomes = await controller.materialize(paths: ["photo.png"], recursive: false)
        let error = try #require(outcomes.first?.error)
        #expect(error.code == .serverUnreachable)
        let replica = engine.replica("faulty")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("photo.png").path))
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("photo.png.placeholder").path))
        await engine.manager.close()
    }

    /// Listing entries named `../x`, `a/b` or with NUL are skipped; the others go on.
    @Test func unsafeListingNamesNeverEscape() async throws {
        let listing = #"""
            [{"name":"../x","size":4096},{"name":"a/b","size":4096},{"name":"nul\u0000.png","size":3},
             {"name":"..","size":4096},{"name":"../../escape.png","size":3},{"name":"","size":1},
             {"name":"ok.png","size":3},{"name":"fine","size":4096},{"bad":true}]
            """#
        let api = OriginalAPI(files: ["ok.png": Data("abc".utf8)], listing: listing)
        let server = try FaultServer { request in
            if request.path == "/media", request.query["path"] == "fine" {
                return .reply(status: 200, headers: [:], body: Data("[]".utf8))
            }
            return api.answer(request) ?? api.full(request)
        }
        let backend = try await Self.backend(server)
        let items = try await backend.enumerateAllItems(in: .rootContainer)
        #expect(items.map(\.filename) == ["fine", "ok.png"])
        await backend.close()

        let engine = try Engine()
        try await engine.manager.addDomain(name: "hostile", kind: "media", options: ["url": server.url, "connections": "1"])
        let controller = try await engine.manager.controller(for: "hostile")
        _ = try await controller.sync()
        #expect(try controller.list(at: "", recursive: true).map(\.path).sorted() == ["fine", "ok.png"])
        let home = engine.scratch.url.appendingPathComponent("home")
        let everything = FileManager.default.enumerator(atPath: engine.scratch.url.path)?.allObjects as? [String] ?? []
        #expect(!everything.contains { $0.hasSuffix("escape.png") || $0.hasSuffix("/x") || $0 == "x" })
        _ = home
        await engine.manager.close()
    }
}
