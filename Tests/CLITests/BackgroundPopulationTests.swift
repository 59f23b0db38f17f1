import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `serve` populates every dataless folder in the background, so a path used by name in a
/// folder no program listed (for which the kernel raises no event) works once serve caught up:
/// the real `fileproviderctl serve`, the real kernel, `cat` through the replica path.
@Suite("Dataless folders populated in the background", .serialized, .timeLimit(.minutes(10)))
struct BackgroundPopulationTests {
    /// How many dataless folders `status --json` counts for the domain.
    static func datalessFolders(_ domain: ServedDomain) async throws -> Int {
        let rows = try #require(try await domain.cli.json(["status", domain.name]) as? [[String: Any]])
        let items = try #require(rows.first?["items"] as? [String: Any], "status --json: \(rows)")
        return try #require(items["datalessFolders"] as? Int, "status --json: \(items)")
    }

    /// Waits until `status --json` counts no dataless folder (what serve's background
    /// population ends with).
    static func waitForBackgroundPopulation(_ domain: ServedDomain, timeout: Double = 120) async throws {
        var left = -1
        let finished = try await waitUntil(timeout: timeout) {
            left = try await datalessFolders(domain)
            return left == 0
        }
        #expect(finished, "\(left) dataless folders left: \(domain.logs.suffix(3000))")
    }

    @Test(arguments: [ServedDomain.Store.local, .sftp])
    func pathsUsedByNameWorkOnceServeCaughtUp(_ kind: ServedDomain.Store) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        // big/ (300 entries) and a/ (251 entries) are past the budget of 250: dataless at
        // depth 1; a/b and a/b/c below a dataless folder are dataless too (depth 3).
        var files: [String: Data] = [:]
        for index in 0..<300 { files[String(format: "big/f%d", index)] = Data("big \(index)\n".utf8) }
        for index in 0..<250 { files[String(format: "a/x%03d", index)] = Data("x \(index)\n".utf8) }
        files["a/b/c/f"] = patterned(70_000, seed: 351)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        #expect(try await Self.datalessFolders(domain) == 4)
        let status = try await domain.cli.run(["status", "d"])
        #expect(status.stdout.contains("dataless folders: 4 left to write"), "\(status.stdout)")

        try await domain.startServe()
        try await Self.waitForBackgroundPopulation(domain)
        let logged = await waitUntil(timeout: 30) { domain.logs.contains("no dataless folder is left") }
        #expect(logged, "\(domain.logs.suffix(2000))")
        let replica = domain.replica
        // By name, in folders no program listed: no open of the folder came first.
        let f1 = try await runProgram(["cat", replica + "/big/f1"])
        #expect(f1.succeeded && f1.output == files["big/f1"], "cat big/f1: \(f1)")
        let deep = try await runProgram(["cat", replica + "/a/b/c/f"])
        #expect(deep.succeeded && deep.output == files["a/b/c/f"], "cat a/b/c/f: \(deep)")
        let after = try await domain.cli.run(["status", "d"])
        #expect(!after.stdout.contains("left to write"), "\(after.stdout)")

        // A store change in a folder populated in the background arrives.
        try domain.write("a/b/c/new.txt", Data("new in the store\n".utf8))
        try domain.write("big/f7", Data("changed in the store\n".utf8))
        let signalled = try await domain.cli.run(["signal", "d"])
        #expect(signalled.status == 0, "\(signalled.stderr)")
        let arrived = await waitUntil(timeout: 60) {
            FileManager.default.fileExists(atPath: replica + "/a/b/c/new.txt")
                && (fileStatus(replica + "/big/f7")?.st_size ?? 0) == 21
        }
        #expect(arrived, "\(domain.logs.suffix(2000))")
        let new = try await runProgram(["cat", replica + "/a/b/c/new.txt"])
        #expect(new.succeeded && new.output == Data("new in the store\n".utf8), "cat a/b/c/new.txt: \(new)")
        let changed = try await runProgram(["cat", replica + "/big/f7"])
        #expect(changed.succeeded && changed.output == Data("changed in the store\n".utf8), "cat big/f7: \(changed)")
        try await domain.stopServe()
        await store.stop()
    }

    @Test func aServeStoppedHalfwayIsFinishedByTheNext() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        // many/ holds 1,500 folders of one file: each is dataless until populated.
        var files: [String: Data] = [:]
        for index in 0..<1500 { files["many/s\(index)/f"] = Data("s \(index)\n".utf8) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        let total = try await Self.datalessFolders(domain)
        #expect(total == 1501)

        // kill -9 once the background population started and before it finished.
        try await domain.startServe()
        var left = total
        let started = try await waitUntil(timeout: 120) {
            left = try await Self.datalessFolders(domain)
            return left < total
        }
        try await domain.killServe()
        left = try await Self.datalessFolders(domain)
        #expect(started && left > 0 && left < total, "\(left) of \(total) left when serve was killed")

        try await domain.startServe()
        try await Self.waitForBackgroundPopulation(domain)
        let replica = domain.replica
        for index in [0, 749, 1499] {
            let cat = try await runProgram(["cat", replica + "/many/s\(index)/f"])
            #expect(cat.succeeded && cat.output == Data("s \(index)\n".utf8), "cat many/s\(index)/f: \(cat)")
        }
        // Every folder whole, no name moved aside by a population that was cut short.
        let found = try await runProgram(["find", replica + "/many", "-type", "f"])
        let paths = String(decoding: found.output, as: UTF8.self).split(separator: "\n")
        #expect(found.succeeded && paths.count == 1500, "find found \(paths.count) of 1,500 files")
        #expect(!paths.contains { $0.contains(" 2") }, "\(paths.filter { $0.contains(" 2") })")
        let conflicts = try await domain.cli.run(["conflicts", "d"])
        #expect(!conflicts.stdout.contains("nameCollision"), "\(conflicts.stdout)")
        try await domain.stopServe()
        await store.stop()
    }

    @Test func theOptionTurnsItOff() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        var files: [String: Data] = [:]
        for index in 0..<300 { files["big/f\(index)"] = Data("big \(index)\n".utf8) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        try await domain.startServe(["--no-populate-in-background"])
        // Observable end of serve's first pass: its sync's log line; the folder stays dataless.
        let synced = await waitUntil(timeout: 60) { domain.logs.contains("d: 0 sent") }
        #expect(synced, "\(domain.logs.suffix(2000))")
        #expect(try await Self.datalessFolders(domain) == 1)
        #expect(!domain.logs.contains("in the background"), "\(domain.logs.suffix(2000))")
        // The open of the folder still populates it.
        let listed = try await runProgram(["ls", "-1", domain.replica + "/big"])
        #expect(listed.succeeded && listed.output.filter { $0 == 10 }.count == 300, "ls: \(listed)")
        try await domain.stopServe()
        await store.stop()
    }
}
