import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

/// Cache budgets through the binary: `domain add/set --cache-budget`, `cache`, `evict
/// --to-budget`, `status`, and `serve` evicting by itself when a budget changes.
@Suite struct BudgetTests {
    /// A local domain `d` over `src` with files `f0`…`f(count-1)` of `size` bytes, synced.
    func setUp(_ temp: TemporaryFolder, count: Int, size: Int = 64 << 10, extra: [String] = []) async throws -> CLIRunner {
        let cli = CLIRunner(in: temp)
        for index in 0..<count {
            try temp.write("src/f\(index)", Data(repeating: UInt8(index), count: size))
        }
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), options: extra, sync: true)
        return cli
    }

    func replica(_ cli: CLIRunner, _ path: String) -> String { cli.home.appendingPathComponent("domains/d/\(path)").path }

    func isPlaceholder(_ cli: CLIRunner, _ path: String) -> Bool {
        !FileManager.default.fileExists(atPath: replica(cli, path))
            && FileManager.default.fileExists(atPath: replica(cli, path) + ".placeholder")
    }

    func domainJSON(_ cli: CLIRunner) async throws -> [String: Any] {
        try #require(try await cli.json(["domain", "show", "d"]) as? [String: Any])
    }

    @Test func budgetsAreSetWithBinarySizesAndBadOnesAreRefusedClearly() async throws {
        let temp = try TemporaryFolder()
        let cli = try await setUp(temp, count: 1, extra: ["--cache-budget", "20G"])
        var shown = try await domainJSON(cli)
        #expect(shown["cacheBudget"] as? Int64 == 20 << 30)
        #expect(shown["hydration"] as? String == "full")
        let text = try await cli.run(["domain", "show", "d"]).stdout
        #expect(text.contains("cache:        0 B used of 20.0 GiB"))
        #expect(text.contains("hydration:    full (used in dataless mode)"))

        let set = try await cli.run(["domain", "set", "d", "--cache-budget", "512M", "--hydration", "progressive"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout == "d: cache budget 512.0 MiB, 0 B used; hydration progressive\n")
        shown = try await domainJSON(cli)
        #expect(shown["cacheBudget"] as? Int64 == 512 << 20)
        #expect(shown["hydration"] as? String == "progressive")
        #expect(try await cli.run(["domain", "set", "d", "--cache-budget", "none"]).status == 0)
        #expect(try await domainJSON(cli)["cacheBudget"] == nil)

        for bad in ["20GB", "-1G", "lots", "3X"] {
            let refused = try await cli.run(["domain", "set", "d", "--cache-budget=\(bad)"])
            #expect(refused.status == 2, "\(bad): \(refused.stderr)")
            #expect(refused.stderr.contains("invalid size '\(bad)'") && refused.stderr.contains("binary units"), "\(refused.stderr)")
        }
        let nothing = try await cli.run(["domain", "set", "d"])
        #expect(nothing.status == 2 && nothing.stderr.contains("nothing to change"))
        let unknown = try await cli.run(["domain", "set", "nope", "--cache-budget", "1G"])
        #expect(unknown.status == 2 && unknown.stderr.contains("no domain named 'nope'"))
        let badAdd = try await cli.run([
            "domain", "add", "--mode", "placeholder-files", "e", "--backend", "local", "--root", temp.url.path, "--cache-budget", "1.5",
        ])
        #expect(badAdd.status == 2 && badAdd.stderr.contains("a number of bytes is whole"))

        // The home's settings.
        let cache = try await cli.run(["cache", "--budget", "50G", "--free-space-floor", "5G"])
        #expect(cache.status == 0, "\(cache.stderr)")
        #expect(cache.stdout.contains("budget of all domains: 50.0 GiB (0 B used)"))
        #expect(cache.stdout.contains("free-space floor:      5.0 GiB"))
        let json = try #require(try await cli.json(["cache"]) as? [String: Any])
        #expect(json["budget"] as? Int64 == 50 << 30)
        #expect(json["freeSpaceFloor"] as? Int64 == 5 << 30)
        #expect(try await cli.run(["cache", "--budget", "none"]).status == 0)
        let cleared = try #require(try await cli.json(["cache"]) as? [String: Any])
        #expect(cleared["budget"] == nil && cleared["freeSpaceFloor"] as? Int64 == 5 << 30)
        #expect(try await cli.run(["cache", "--free-space-floor", "1GB"]).status == 2)
    }

    @Test func evictToBudgetTakesTheOldestLazyFilesNeverPinnedEditedOrOpenOnes() async throws {
        let temp = try TemporaryFolder()
        let cli = try await setUp(temp, count: 8)
        // Used in this order (a materialize is a use): f0 the least recently.
        for index in 0..<8 { #expect(try await cli.run(["materialize", "d:/f\(index)"]).status == 0) }
        #expect(try await cli.run(["pin", "d:/f0"]).status == 0)
        try Data("edited".utf8).write(to: URL(fileURLWithPath: replica(cli, "f1")))
        let open = try CloseOnExecFile.reading(URL(fileURLWithPath: replica(cli, "f3")))
        defer { try? open.close() }
        // 8 files of 64 KiB (f1's record still counts 64 KiB): 512 KiB; 3 must go.
        #expect(try await cli.run(["domain", "set", "d", "--cache-budget", "320K"]).status == 0)

        let pass = try await cli.run(["evict", "--to-budget"])
        #expect(pass.status == 0, "\(pass.stderr)")
        let lines = pass.stdout.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                "evicted d:/f2 (64.0 KiB): over the budget of d: 512.0 KiB used of 320.0 KiB",
                "evicted d:/f4 (64.0 KiB): over the budget of d: 448.0 KiB used of 320.0 KiB",
                "evicted d:/f5 (64.0 KiB): over the budget of d: 384.0 KiB used of 320.0 KiB",
                "kept d:/f0: pinned (eager, set on /f0)",
                "kept d:/f1: has local changes that are not uploaded",
                "kept d:/f3: a program has it open",
                "d: 320.0 KiB used of 320.0 KiB",
                "evicted 3 files (192.0 KiB)",
            ], "\(pass.stdout)")
        for path in ["f2", "f4", "f5"] { #expect(isPlaceholder(cli, path)) }
        for path in ["f0", "f3", "f6", "f7"] {
            #expect(FileManager.default.contents(atPath: replica(cli, path))?.count == 64 << 10)
        }
        #expect(FileManager.default.contents(atPath: replica(cli, "f1")) == Data("edited".utf8))
        #expect(try open.readToEnd()?.count == 64 << 10)

        // status shows use, budget and the last evictions; --json too.
        let status = try await cli.run(["status"])
        #expect(status.stdout.contains("  cache: 320.0 KiB used of 320.0 KiB"), "\(status.stdout)")
        #expect(status.stdout.contains("/f5 (64.0 KiB): over the budget of d: 384.0 KiB used of 320.0 KiB"))
        let rows = try #require(try await cli.json(["status"]) as? [[String: Any]])
        let evictions = try #require(rows.first?["evictions"] as? [[String: Any]])
        #expect(evictions.map { $0["path"] as? String } == ["/f5", "/f4", "/f2"])
        #expect((rows.first?["cache"] as? [String: Any])?["materialized"] as? Int64 == 320 << 10)

        // Under the budget: a pass does nothing. JSON names the domains.
        let again = try #require(try await cli.json(["evict", "--to-budget", "d"]) as? [String: Any])
        #expect((again["evicted"] as? [Any])?.isEmpty == true)
        #expect((again["domains"] as? [[String: Any]])?.first?["used"] as? Int64 == 320 << 10)
        // Usage errors.
        #expect(try await cli.run(["evict"]).status == 2)
        #expect(try await cli.run(["evict", "--to-budget", "-R"]).status == 2)
        #expect(try await cli.run(["evict", "--to-budget", "nope"]).status == 2)
    }

    /// Budget changes take effect without a restart: `serve` runs, `domain set` lowers the
    /// budget, and evictions follow; a file a program opened recently stays, and so does one
    /// it holds open.
    @Test func serveEvictsWhenTheBudgetChangesWithoutARestart() async throws {
        let temp = try TemporaryFolder()
        let cli = try await setUp(temp, count: 6)
        for index in 0..<6 { #expect(try await cli.run(["materialize", "d:/f\(index)"]).status == 0) }
        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600", "--eviction-interval", "0.3", "--settle", "0.2"],
            log: temp.url.appendingPathComponent("serve.log"))
        let store = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        let domainID = try #require(try store.domain(named: "d")?.id)
        #expect(await waitUntil { serve.output.contains("d: 0 sent") }, "\(serve.output)")

        // A program reads f0 (the least recently materialized): it becomes the most recently used.
        let before = try #require(try store.lastUse(domainID: domainID, identifier: "f0"))
        #expect(FileManager.default.contents(atPath: replica(cli, "f0"))?.count == 64 << 10)
        #expect(await waitUntil { ((try? store.lastUse(domainID: domainID, identifier: "f0")) ?? before) > before }, "\(serve.output)")
        // And holds f1 open.
        let open = try CloseOnExecFile.reading(URL(fileURLWithPath: replica(cli, "f1")))
        defer { try? open.close() }

        // 6 × 64 KiB = 384 KiB; 256 KiB: two files go, the oldest ones not open: f2 and f3.
        #expect(try await cli.run(["domain", "set", "d", "--cache-budget", "256K"]).status == 0)
        #expect(await waitUntil { isPlaceholder(cli, "f2") && isPlaceholder(cli, "f3") }, "\(serve.output)")
        for path in ["f0", "f1", "f4", "f5"] { #expect(FileManager.default.fileExists(atPath: replica(cli, path)), "\(path)") }
        #expect(serve.output.contains("d: evicted /f2 (64.0 KiB): over the budget of d: 384.0 KiB used of 256.0 KiB"), "\(serve.output)")

        // Lower again, while serve runs: f4 and f5 go; f1 stays while it is open, f0 was read
        // last and is the last to go.
        #expect(try await cli.run(["domain", "set", "d", "--cache-budget", "64K"]).status == 0)
        #expect(await waitUntil { isPlaceholder(cli, "f4") && isPlaceholder(cli, "f5") && isPlaceholder(cli, "f0") }, "\(serve.output)")
        #expect(FileManager.default.fileExists(atPath: replica(cli, "f1")), "the open file stays")

        // Closed, it goes at the next pass that needs the room.
        try open.close()
        #expect(try await cli.run(["domain", "set", "d", "--cache-budget", "0"]).status == 0)
        #expect(await waitUntil { isPlaceholder(cli, "f1") }, "\(serve.output)")
        #expect(await serve.stop() == 0)
        let status = try await cli.run(["status", "d"])
        #expect(status.stdout.contains("cache: 0 B used of 0 B"), "\(status.stdout)")
    }
}

/// Budgets in a `dataless` domain through the real `serve`: reads through the replica path are
/// uses, eviction gives the blocks back (a dataless file again, the next read fetches it), and a
/// pinned or an open file stays. (Edited files: `BudgetTests` and `EvictorTests`; here serve
/// uploads an edit as soon as its writer closes it, and then it may go.)
@Suite("Budgets of dataless domains", .serialized, .timeLimit(.minutes(5)))
struct DatalessBudgetTests {
    @Test func serveEvictsTheLeastRecentlyReadFilesOfADatalessDomain() async throws {
        let temp = try TemporaryFolder()
        let storeFolder = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: storeFolder, withIntermediateDirectories: true)
        let names = ["a.bin", "b.bin", "c.bin", "d.bin", "pinned.bin"]
        var files: [String: Data] = [:]
        for (index, name) in names.enumerated() { files[name] = patterned(256 << 10, seed: UInt64(index + 1)) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: storeFolder, backend: "local", options: ["root": storeFolder], files: files)
        #expect(try await domain.cli.run(["pin", "d:/pinned.bin"]).status == 0)
        try await domain.startServe(["--eviction-interval", "0.3", "--log-level", "debug"])
        let store = try MetadataStore(url: domain.cli.home.appendingPathComponent("metadata.sqlite"))
        let id = try #require(try store.domain(named: "d")?.id)

        // Programs read the files in this order: a, b, c, d (each read is its last use).
        func lastUse(_ name: String) -> Date? { try? store.lastUse(domainID: id, identifier: ItemIdentifier(name)) }
        func read(_ name: String) async throws {
            let before = lastUse(name) ?? .distantPast
            let read = try await runProgram(["cat", domain.replica + "/" + name])
            #expect(read.succeeded && read.output == files[name], "\(name): \(read)")
            #expect(await waitUntil { (lastUse(name) ?? .distantPast) > before }, "no use of \(name) was recorded: \(domain.logs)")
        }
        for name in ["a.bin", "b.bin", "c.bin", "d.bin"] { try await read(name) }
        // A program holds b open.
        let open = try CloseOnExecFile.reading(URL(fileURLWithPath: domain.replica + "/b.bin"))
        defer { try? open.close() }

        // 5 files of 256 KiB downloaded; 768 KiB: a and c go (b is open; pinned.bin is pinned).
        #expect(try await domain.cli.run(["domain", "set", "d", "--cache-budget", "768K"]).status == 0)
        func isDataless(_ name: String) -> Bool { (fileStatus(domain.backing + "/" + name)?.st_blocks ?? 9999) <= 8 }
        func uses() -> String {
            names.map { "\($0): \(lastUse($0).map { "\($0.timeIntervalSince1970)" } ?? "none")" }.joined(separator: ", ")
        }
        #expect(await waitUntil(timeout: 30) { isDataless("a.bin") && isDataless("c.bin") }, "last uses \(uses()); \(domain.logs)")
        for name in ["b.bin", "d.bin", "pinned.bin"] { #expect(!isDataless(name), "\(name): \(domain.logs)") }
        #expect(domain.logs.contains("d: evicted /a.bin (256.0 KiB): over the budget of d:"), "\(domain.logs)")
        #expect(try open.readToEnd() == files["b.bin"], "the open file reads its contents")
        #expect(fileStatus(domain.replica + "/a.bin")?.st_size == 256 << 10)

        // Read again: fetched again (the store's bytes), the newest use; over the budget again,
        // the least recently used file that may go is d.
        try await read("a.bin")
        #expect(await domain.fetches(of: "a.bin", reaching: 2) == 2, "\(domain.logs)")
        #expect(await waitUntil(timeout: 30) { isDataless("d.bin") }, "\(domain.logs)")
        #expect(!isDataless("a.bin") && !isDataless("b.bin") && !isDataless("pinned.bin"), "\(domain.logs)")
        try await domain.stopServe()
    }
}
