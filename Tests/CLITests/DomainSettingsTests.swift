import Foundation
import Testing

/// `domain set` with backend options and ignore patterns, `domain disconnect`/`connect`, and
/// `domain add --adopt-replica`, through the real binary.
@Suite struct DomainSettingsTests {
    let temp: TemporaryFolder
    let cli: CLIRunner
    var src: URL { temp.url.appendingPathComponent("src") }
    var replica: URL { cli.home.appendingPathComponent("domains/d") }

    init() async throws {
        temp = try TemporaryFolder()
        cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
        try temp.write("src/sub/b.txt", Data("bb".utf8))
        try temp.write("other/c.txt", Data("ccc".utf8))
        try await cli.addLocalDomain("d", root: src)
        #expect(try await cli.run(["sync"]).status == 0)
    }

    func shown() async throws -> [String: Any] {
        try #require(try await cli.json(["domain", "show", "d"]) as? [String: Any])
    }

    func options() async throws -> [String: String] { try await shown()["options"] as? [String: String] ?? [:] }

    @Test func setChangesBackendOptionsWithTheChecksOfAdd() async throws {
        let set = try await cli.run(["domain", "set", "d", "--page-size", "50"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.contains("--page-size 50"), "\(set.stdout)")
        #expect(try await options()["page-size"] == "50")

        // Refused as add refuses them; nothing changes.
        for (arguments, message) in [
            (["--page-size", "many"], "option --page-size takes a whole number, not 'many'"),
            (["--colour", "red"], "the local backend has no option --colour"),
            (["--root", temp.url.appendingPathComponent("missing").path], "cannot be used"),
            (["--root", replica.path], "overlaps --root"),
            (["--unset", "colour"], "the local backend has no option --colour"),
        ] {
            let refused = try await cli.run(["domain", "set", "d"] + arguments)
            #expect(refused.status != 0, "\(arguments)")
            #expect(refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }
        #expect(try await options() == ["page-size": "50", "root": src.path])

        // Another root: the next sync shows that store; --unset puts the default back.
        let moved = try await cli.run([
            "domain", "set", "d", "--root", temp.url.appendingPathComponent("other").path, "--unset", "page-size",
        ])
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(try await options() == ["page-size": "2000", "root": temp.url.appendingPathComponent("other").path])
        #expect(try await cli.run(["sync", "d"]).status == 0)
        let names = (try await cli.json(["ls", "d:/"]) as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(names == ["c.txt"])

        // Ignore patterns: replaced, then removed; an ignored name is never uploaded.
        #expect(try await cli.run(["domain", "set", "d", "--ignore", "*.tmp", "--ignore", "~*"]).status == 0)
        #expect(try await shown()["ignore"] as? [String] == ["*.tmp", "~*"])
        try Data("scratch".utf8).write(to: replica.appendingPathComponent("x.tmp"))
        #expect(try await cli.run(["sync", "d"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: temp.url.appendingPathComponent("other/x.tmp").path))
        #expect(try await cli.run(["domain", "set", "d", "--no-ignore"]).status == 0)
        #expect(try await shown()["ignore"] as? [String] == [])
        let both = try await cli.run(["domain", "set", "d", "--ignore", "a", "--no-ignore"])
        #expect(both.status == 2)
    }

    @Test func aDisconnectedDomainKeepsEverythingAndSyncsNothing() async throws {
        #expect(try await cli.run(["materialize", "d:/a.txt"]).status == 0)
        let disconnected = try await cli.run(["domain", "disconnect", "d"])
        #expect(disconnected.status == 0, "\(disconnected.stderr)")
        #expect(disconnected.stdout.contains("disconnected domain 'd'"))
        #expect(try await shown()["connected"] as? Bool == false)
        let status = try await cli.run(["status"])
        #expect(status.stdout.contains("; disconnected: nothing is synced"), "\(status.stdout)")
        #expect(try await cli.run(["domain", "show", "d"]).stdout.contains("connected:    no"))

        // Replica and records are kept; offline commands work.
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt").path))
        #expect((try await cli.json(["ls", "-R", "d:/"]) as? [[String: Any]])?.count == 3)

        // Nothing is synced: sync NAME refuses, sync alone leaves it out, serve does not serve it.
        try Data("new".utf8).write(to: replica.appendingPathComponent("new.txt"))
        let named = try await cli.run(["sync", "d"])
        #expect(named.status == 1)
        #expect(named.stderr.contains("domain 'd' is disconnected"), "\(named.stderr)")
        let all = try await cli.run(["sync"])
        #expect(all.status == 0)
        #expect(all.stderr.contains("d: disconnected, not synced"), "\(all.stderr)")
        let serve = try await cli.run(["serve"])
        #expect(serve.status == 1)
        #expect(serve.stderr.contains("not serving d: it is disconnected"), "\(serve.stderr)")
        #expect(serve.stderr.contains("no connected domains to serve"), "\(serve.stderr)")
        #expect(!FileManager.default.fileExists(atPath: src.appendingPathComponent("new.txt").path))
        // Nothing is fetched either: materialize and pin refuse the download (pin keeps the
        // policy, so the next sync after connecting downloads the file).
        let materialized = try await cli.run(["materialize", "d:/sub/b.txt"])
        #expect(materialized.status == 1)
        #expect(materialized.stderr.contains("domain 'd' is disconnected"), "\(materialized.stderr)")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("sub/b.txt").path))
        let pinned = try await cli.run(["pin", "d:/sub/b.txt"])
        #expect(pinned.status == 1)
        #expect(pinned.stderr.contains("domain 'd' is disconnected"), "\(pinned.stderr)")

        // Connected again: the change made meanwhile goes up, the pinned file comes down.
        let connected = try await cli.run(["domain", "connect", "d"])
        #expect(connected.status == 0, "\(connected.stderr)")
        #expect(try await cli.run(["sync"]).status == 0)
        #expect(FileManager.default.fileExists(atPath: src.appendingPathComponent("new.txt").path))
        #expect(FileManager.default.contents(atPath: replica.appendingPathComponent("sub/b.txt").path) == Data("bb".utf8))
    }

    @Test func aRunningServePausesADisconnectedDomainAndResumesIt() async throws {
        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600", "--settle", "0.1"], log: temp.url.appendingPathComponent("serve.log"))
        #expect(await waitUntil { serve.output.contains(" conflicts; ") }, "\(serve.output)")
        #expect(try await cli.run(["domain", "disconnect", "d"]).status == 0)
        #expect(await waitUntil { serve.output.contains("d: disconnected; not synced") }, "\(serve.output)")
        try Data("while paused".utf8).write(to: replica.appendingPathComponent("paused.txt"))
        #expect(try await cli.run(["domain", "connect", "d"]).status == 0)
        #expect(await waitUntil { serve.output.contains("d: connected again") }, "\(serve.output)")
        #expect(
            await waitUntil { (try? Data(contentsOf: src.appendingPathComponent("paused.txt"))) == Data("while paused".utf8) },
            "\(serve.output)")
        #expect(await serve.stop() == 0)
    }

    @Test func aKeptReplicaIsTakenOverWithoutDownloadingOrDuplicating() async throws {
        #expect(try await cli.run(["materialize", "-R", "d:/"]).status == 0)
        let removed = try await cli.run(["domain", "remove", "d", "--keep-replica"])
        #expect(removed.status == 0, "\(removed.stderr)")
        // One file changed meanwhile: it must survive beside the store's.
        try Data("edited while removed".utf8).write(to: replica.appendingPathComponent("sub/b.txt"))

        let add = ["domain", "add", "--mode", "placeholder-files", "d", "--backend", "local", "--root", src.path]
        let refused = try await cli.run(add)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--adopt-replica"), "\(refused.stderr)")
        let dataless = try await cli.run(add + ["--adopt-replica", "--mode", "dataless"])
        #expect(dataless.status == 2)

        let adopted = try await cli.run(add + ["--adopt-replica"])
        #expect(adopted.status == 0, "\(adopted.stderr)")
        #expect(adopted.stdout.contains("took over 1 file (1 B) and 1 folder already there; 1 file differs"), "\(adopted.stdout)")
        let a = (try await cli.json(["ls", "d:/a.txt"]) as? [[String: Any]])?.first
        #expect(a?["state"] as? String == "materialized")

        let synced = try await cli.run(["sync", "d", "--json"])
        #expect(synced.status == 0, "\(synced.stderr)")
        let report = ((try JSONSerialization.jsonObject(with: Data(synced.stdout.utf8)) as? [String: Any])?["reports"] as? [[String: Any]])?
            .first
        #expect(report?["downloaded"] as? Int == 0, "\(synced.stdout)")
        // Nothing lost, nothing duplicated: the store has its b.txt and the local edit beside it.
        let stored = try FileManager.default.contentsOfDirectory(atPath: src.appendingPathComponent("sub").path).sorted()
        #expect(stored.count == 2, "\(stored)")
        #expect(try Data(contentsOf: src.appendingPathComponent("sub/b.txt")) == Data("bb".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: src.path).sorted() == ["a.txt", "sub"])
    }
}
