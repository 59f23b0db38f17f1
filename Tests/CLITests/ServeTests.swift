import Foundation
import ProviderStore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A `fileproviderctl serve` (or another command) running in the background, its output going
/// to a log file.
final class ServeProcess {
    let process = TestProcess()
    let exit: ProcessExit
    let log: URL

    init(_ cli: CLIRunner, _ arguments: [String], log: URL, command: String = "serve", environment: [String: String] = [:]) throws {
        self.log = log
        cli.configure(process, [command] + arguments, environment: environment)
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        exit = ProcessExit(process)
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            exit.wait()
        }
    }

    var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// Sends a signal and waits (at most `timeout` seconds) for the process to end; returns its
    /// exit status, or `nil` when it is still running.
    func stop(_ signal: Int32 = SIGTERM, timeout: Double = 10) async -> Int32? {
        kill(process.processIdentifier, signal)
        guard await waitUntil(timeout: timeout, { !process.isRunning }) else { return nil }
        return process.terminationStatus
    }
}

/// ``eventually(timeout:every:_:)`` with the CLI tests' shorter default.
func waitUntil(timeout: Double = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
    try await eventually(timeout: timeout, every: 0.025, condition)
}

/// `serve`, `signal` and `why` through the real binary.
@Suite struct ServeTests {
    @Test func serveUploadsLocalFilesPollsOnSignalAndStopsCleanly() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("hello".utf8))
        let src = temp.url.appendingPathComponent("src")
        try await cli.addLocalDomain("d", root: src)
        let replica = cli.home.appendingPathComponent("domains/d")

        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600", "--settle", "0.2"], log: temp.url.appendingPathComponent("serve.log"))
        // status works while serve runs (same database, WAL); the first sync is recorded.
        let synced = try await waitUntil {
            let domains = try await cli.json(["status"]) as? [[String: Any]]
            return domains?.first?["lastSyncAt"] != nil
        }
        #expect(synced, "\(serve.output)")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt.placeholder").path))

        // A file written into the replica reaches the store (inotify; no poll is due for an hour).
        try Data("from the replica".utf8).write(to: replica.appendingPathComponent("new.txt"))
        let uploaded = await waitUntil { (try? Data(contentsOf: src.appendingPathComponent("new.txt"))) == Data("from the replica".utf8) }
        #expect(uploaded, "\(serve.output)")
        // So does a new folder with a file in it.
        try FileManager.default.createDirectory(at: replica.appendingPathComponent("folder"), withIntermediateDirectories: true)
        try Data("inside".utf8).write(to: replica.appendingPathComponent("folder/inside.txt"))
        #expect(
            await waitUntil { (try? Data(contentsOf: src.appendingPathComponent("folder/inside.txt"))) == Data("inside".utf8) },
            "\(serve.output)")

        // A change in the store comes down after 'signal'.
        try temp.write("src/b.txt", Data("remote".utf8))
        try temp.write("src/a.txt", Data("hello, changed".utf8))
        let signalled = try await cli.run(["signal", "d"])
        #expect(signalled.status == 0, "\(signalled.stderr)")
        #expect(signalled.stdout.contains("signalled serve (process \(serve.process.processIdentifier))"))
        #expect(
            await waitUntil { FileManager.default.fileExists(atPath: replica.appendingPathComponent("b.txt.placeholder").path) },
            "\(serve.output)")
        let changed = await waitUntil {
            guard let data = try? Data(contentsOf: replica.appendingPathComponent("a.txt.placeholder")),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return false }
            return object["size"] as? Int == 14
        }
        #expect(changed, "\(serve.output)")

        // Other commands keep working against the same database.
        let items = try #require(try await cli.json(["ls", "d:/"]) as? [[String: Any]])
        let states = Dictionary(
            uniqueKeysWithValues: items.compactMap { item in (item["path"] as? String).map { ($0, item["state"] as? String ?? "") } })
        #expect(states["/new.txt"] == "materialized")
        #expect(states["/b.txt"] == "placeholder")
        let status = try await cli.run(["status", "d"])
        #expect(status.status == 0 && status.stdout.contains("served by process \(serve.process.processIdentifier)"))
        #expect(try await cli.run(["materialize", "d:/b.txt"]).status == 0)
        // So does a sync of the same domain: it takes turns with serve's passes.
        let concurrent = try await cli.run(["sync", "d"])
        #expect(concurrent.status == 0, "\(concurrent.stderr)")
        #expect(try String(contentsOf: replica.appendingPathComponent("b.txt"), encoding: .utf8) == "remote")
        // A second serve of the same domain is refused.
        let second = try await cli.run(["serve", "d"])
        #expect(second.status == 1 && second.stderr.contains("already served by process"))

        // SIGTERM: exit 0, lock released, database intact.
        let status0 = await serve.stop(SIGTERM)
        #expect(status0 == 0, "\(serve.output)")
        #expect(serve.output.contains("stopped"))
        #expect(serve.output.contains("d: 1 sent"))
        let store = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        #expect(try store.integrityCheck() == "ok")
        let late = try await cli.run(["signal", "d"])
        #expect(late.status == 0 && late.stderr.contains("no serve process runs this domain"))
    }

    @Test func syncWaitsWhileAnotherProcessSyncsTheDomain() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))

        // This test process takes the domain's sync lock, as serve does for each pass.
        let lockPath = cli.home.appendingPathComponent("locks/sync/d.lock").path
        try FileManager.default.createDirectory(atPath: (lockPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        #expect(fd >= 0 && flock(fd, LOCK_EX) == 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }

        let output = temp.url.appendingPathComponent("sync.out")
        let sync = try ServeProcess(cli, ["d"], log: output, command: "sync")
        let said = "d: waiting for process \(getpid()) to finish its sync of this domain"
        #expect(await waitUntil { sync.output.contains(said) }, "\(sync.output)")
        #expect(sync.process.isRunning, "sync did not wait: \(sync.output)")
        #expect(!FileManager.default.fileExists(atPath: cli.home.appendingPathComponent("domains/d/a.txt.placeholder").path))

        close(fd)
        #expect(await waitUntil { !sync.process.isRunning }, "\(sync.output)")
        #expect(sync.process.terminationStatus == 0, "\(sync.output)")
        #expect(sync.output.contains("d: 0 local changes sent, 0 conflicts; 1 items listed, 1 added"), "\(sync.output)")
    }

    @Test func serveWritesADatalessFolderWhenAProgramOpensIt() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        for index in 0..<6 { try temp.write("src/albums/a\(index % 2)/photo\(index).jpg", Data("photo \(index)".utf8)) }
        try temp.write("src/albums/cover.jpg", Data("cover".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))
        #expect(try await cli.run(["sync", "d", "--populate-limit", "0"]).status == 0)
        let replica = cli.home.appendingPathComponent("domains/d")
        // Background population off: the folders are populated because they are opened.
        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600", "--no-populate-in-background"], log: temp.url.appendingPathComponent("serve.log"))
        #expect(await waitUntil { serve.output.contains("serving d") }, "\(serve.output)")

        // Listing the dataless folder (opendir in this process) waits until serve wrote its items.
        let albums = try await offThePool {
            try FileManager.default.contentsOfDirectory(atPath: replica.appendingPathComponent("albums").path)
        }
        #expect(albums.sorted() == ["a0", "a1", "cover.jpg.placeholder"], "\(serve.output)")
        let a1 = try await offThePool {
            try FileManager.default.contentsOfDirectory(atPath: replica.appendingPathComponent("albums/a1").path)
        }
        #expect(a1.sorted() == ["photo1.jpg.placeholder", "photo3.jpg.placeholder", "photo5.jpg.placeholder"], "\(serve.output)")
        let items = try #require(try await cli.json(["ls", "d:/albums"]) as? [[String: Any]])
        #expect(items.first { $0["path"] as? String == "/albums/a1" }?["dataless"] as? Bool == false)
        #expect(items.first { $0["path"] as? String == "/albums/a0" }?["dataless"] as? Bool == true)
        #expect(await serve.stop(SIGTERM) == 0, "\(serve.output)")
    }

    /// A first sync writes no index of names (v24); `serve` builds it once nothing else is due,
    /// so the first `find -name` does not wait for it.
    @Test func serveBuildsTheIndexOfNamesWhenIdle() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        for index in 0..<20 { try temp.write("src/f\(index % 4)/file\(index).\(index % 2 == 0 ? "pdf" : "txt")", Data("\(index)".utf8)) }
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))
        #expect(try await cli.run(["sync", "d"]).status == 0)
        let database = cli.home.appendingPathComponent("metadata.sqlite").path
        let indexQuery = "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'item_name';"
        let before = try await runProgram(["sqlite3", database, indexQuery])
        #expect(
            before.succeeded && String(decoding: before.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "0",
            "\(before)")

        let serve = try ServeProcess(cli, ["d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("serve.log"))
        #expect(
            await waitUntil(timeout: 30) { serve.output.contains("built the index of names for 'fileproviderctl find -name'") },
            "\(serve.output)")
        let after = try await runProgram(["sqlite3", database, indexQuery])
        #expect(
            after.succeeded && String(decoding: after.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "1",
            "\(after)")
        let found = try await cli.run(["find", "d", "-name", "*.pdf"])
        #expect(found.status == 0 && found.stdout.split(separator: "\n").count == 10, "\(found.stdout)")
        #expect(await serve.stop(SIGTERM) == 0, "\(serve.output)")
        // Once: a second serve finds it there and says nothing of it.
        let again = try ServeProcess(cli, ["d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("serve2.log"))
        #expect(await waitUntil(timeout: 30) { again.output.contains(" conflicts; ") }, "\(again.output)")
        #expect(await again.stop(SIGTERM) == 0, "\(again.output)")
        #expect(!again.output.contains("built the index of names"), "\(again.output)")
    }

    @Test func serveRefusesBadOptions() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        #expect(try await cli.run(["serve", "nope"]).status == 2)
        #expect(try await cli.run(["serve", "--poll-interval", "0"]).status == 2)
        let none = try await cli.run(["serve"])
        #expect(none.status == 1 && none.stderr.contains("no connected domains"))
    }

    @Test func whyExplainsPendingPinnedAndConflictedItems() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/docs/a.txt", Data("one".utf8))
        try temp.write("src/docs/b.txt", Data("base".utf8))
        try temp.write("src/p/pinned.txt", Data("keep".utf8))
        let src = temp.url.appendingPathComponent("src")
        try await cli.addLocalDomain("d", root: src)
        _ = try await cli.run(["sync", "d"])
        let replica = cli.home.appendingPathComponent("domains/d")

        // Pinned through its folder.
        #expect(try await cli.run(["pin", "d:/p"]).status == 0)
        let pinned = try #require(try await cli.json(["why", "d:/p/pinned.txt"]) as? [String: Any])
        #expect(pinned["pinned"] as? Bool == true && pinned["pinnedBy"] as? String == "/p" && pinned["state"] as? String == "materialized")
        let pinnedText = try await cli.run(["why", replica.appendingPathComponent("p/pinned.txt").path])
        #expect(pinnedText.status == 0)
        #expect(pinnedText.stdout.hasPrefix("d:/p/pinned.txt\n"))
        #expect(pinnedText.stdout.contains("  - eager through d:/p: pinned: kept downloaded"))

        // Pending: edited locally, and a new local file, neither uploaded yet.
        #expect(try await cli.run(["materialize", "d:/docs/a.txt"]).status == 0)
        try Data("one, edited".utf8).write(to: replica.appendingPathComponent("docs/a.txt"))
        try Data("new".utf8).write(to: replica.appendingPathComponent("docs/new.txt"))
        let edited = try #require(try await cli.json(["why", "d:/docs/a.txt"]) as? [String: Any])
        #expect(edited["localChange"] as? String == "edited" && edited["known"] as? Bool == true)
        #expect(try await cli.run(["why", "d:/docs/a.txt"]).stdout.contains("changed locally since it was downloaded; not uploaded yet"))
        let created = try #require(try await cli.json(["why", "d:/docs/new.txt"]) as? [String: Any])
        #expect(
            created["localChange"] as? String == "created" && created["known"] as? Bool == false && created["state"] as? String == "local")
        let swap = replica.appendingPathComponent("docs/.a.txt.swp")
        try Data("x".utf8).write(to: swap)
        let ignored = try #require(try await cli.json(["why", swap.path]) as? [String: Any])
        #expect(ignored["localChange"] as? String == "ignored")
        #expect(try await cli.run(["sync", "d"]).status == 0)
        let clean = try #require(try await cli.json(["why", "d:/docs/a.txt"]) as? [String: Any])
        #expect(clean["localChange"] == nil && (clean["operations"] as? [Any])?.isEmpty == true)

        // Conflicted: edited on both sides.
        #expect(try await cli.run(["materialize", "d:/docs/b.txt"]).status == 0)
        try Data("local edit".utf8).write(to: replica.appendingPathComponent("docs/b.txt"))
        try temp.write("src/docs/b.txt", Data("remote edit, longer".utf8))
        #expect(try await cli.run(["sync", "d"]).status == 0)
        let conflicted = try #require(try await cli.json(["why", "d:/docs/b.txt"]) as? [String: Any])
        let conflicts = try #require(conflicted["conflicts"] as? [[String: Any]])
        #expect(conflicts.first?["kind"] as? String == "bothEdited")
        let kept = try #require(conflicts.first?["keptPath"] as? String)
        #expect(kept.hasPrefix("/docs/b (conflicted copy "))
        let conflictText = try await cli.run(["why", "d:/docs/b.txt"])
        #expect(conflictText.stdout.contains("conflict (bothEdited)"))
        #expect(conflictText.stdout.contains("the other version is d:\(kept)"))
        let copy = try #require(try await cli.json(["why", "d:" + kept]) as? [String: Any])
        #expect((copy["conflicts"] as? [[String: Any]])?.count == 1)

        let missing = try await cli.run(["why", "d:/nothing"])
        #expect(missing.status == 1 && missing.stderr.contains("no item at d:/nothing"))
    }
}
