import Foundation
import ProviderStore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// kill -9 of the real `fileproviderctl sync` and `materialize -R` at seeded random moments
/// during large upload and download sets; after restarts the state converges with nothing
/// duplicated or lost and an intact database.
@Suite struct CrashTests {
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }

    /// One run of the binary that may be killed.
    struct Attempt {
        var killed: Bool
        /// SIGKILL was sent (the process had not ended by the moment chosen). Under load the
        /// termination reason Foundation reports can lag behind, so `killed` may miss a kill.
        var killSent = false
        var status: Int32
        var stderr: String
        var seconds: Double
    }

    static let seed: UInt64 = ProcessInfo.processInfo.environment["CRASH_SEED"].flatMap { UInt64($0) } ?? 20_261_121

    @Test func killNineDuringLargeUploadsAndDownloadsLosesAndDuplicatesNothing() async throws {
        let seed = Self.seed
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let work = CrashWorkload(
            seed: seed, store: temp.url.appendingPathComponent("store"), replica: cli.home.appendingPathComponent("domains/crash"))
        try FileManager.default.createDirectory(at: work.store, withIntermediateDirectories: true)
        let added = try await cli.run([
            "domain", "add", "--mode", "placeholder-files", "crash", "--backend", "local", "--root", work.store.path,
        ])
        #expect(added.status == 0, "\(added.stderr)")

        var kills = 0
        var attempts = 0
        var log: [String] = []
        let started = Date()

        /// Runs `arguments` again and again, killing each run after a seeded delay, until a run
        /// finishes by itself; returns the kills.
        func killLoop(_ arguments: [String], label: String) async throws -> Int {
            var killedHere = 0
            for _ in 0..<60 {
                attempts += 1
                let delay = Double(Int.random(in: 10...400, using: &work.rng)) / 1000
                // After a dozen kills in a row the run is let finish, so every phase completes.
                let attempt = try await Self.runAndMaybeKill(cli, arguments, after: killedHere >= 12 ? 600 : delay)
                log.append(
                    "\(label): \(attempt.killed ? "killed" : "exit \(attempt.status)") after \(String(format: "%.3f", attempt.seconds)) s")
                if attempt.killed {
                    killedHere += 1
                    continue
                }
                if attempt.status != 0 { log.append("  stderr: \(attempt.stderr)") }
                #expect(attempt.status == 0, "seed \(seed): \(label) failed after restarts: \(attempt.stderr)")
                return killedHere
            }
            Issue.record("seed \(seed): \(label) never finished in 60 attempts")
            return killedHere
        }

        var round = 0
        while round < 2 || (kills < 30 && round < 12) {
            round += 1
            // Downloads: new files in the store, materialized with -R; uploads: new files in the
            // replica, edits and renames of earlier ones, a folder renamed.
            try work.addStoreFiles(below: "down\(round)")
            try work.addReplicaChanges(round: round)
            kills += try await killLoop(["sync", "crash"], label: "round \(round) sync")
            kills += try await killLoop(["materialize", "-R", "crash:/down\(round)"], label: "round \(round) materialize")
        }

        try await finalChecks(cli, work, seed: seed, log: log)
        #expect(kills >= 30, "seed \(seed): only \(kills) kills landed during work")
        print(log.joined(separator: "\n"))
        print(
            "crash seed \(seed): \(kills) kills in \(attempts) runs over \(round) rounds, \(work.expected.count) files, \(String(format: "%.1f", Date().timeIntervalSince(started))) s"
        )
    }

    @Test func killNineOfServeDuringLargeUploadsAndDownloadsLosesAndDuplicatesNothing() async throws {
        let seed = Self.seed &+ 1
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let work = CrashWorkload(
            seed: seed, store: temp.url.appendingPathComponent("store"), replica: cli.home.appendingPathComponent("domains/crash"))
        let (store, replica) = (work.store, work.replica)

        // Files the store gets land below a pinned folder, so serve downloads them by itself.
        try work.write(store, "down/pinned.txt", Data("pinned".utf8))
        work.expected["down/pinned.txt"] = Data("pinned".utf8)
        try await cli.addLocalDomain("crash", root: store, sync: true)
        #expect(try await cli.run(["pin", "crash:/down"]).status == 0)

        let serve = ["serve", "crash", "--poll-interval", "0.3", "--settle", "0"]
        var kills = 0
        var log: [String] = []
        let started = Date()
        func converged() -> Bool { files(in: store) == work.expected && files(in: replica) == work.expected }
        var round = 0
        while round < 2 || (kills < 30 && round < 10) {
            round += 1
            try work.addStoreFiles(below: "down/r\(round)")
            // Edits in the store of files serve downloaded in earlier rounds.
            let pinnedEarlier = work.expected.keys.filter { $0.hasPrefix("down/r") && !$0.hasPrefix("down/r\(round)/") }.sorted()
            for path in pinnedEarlier.shuffled(using: &work.rng).prefix(20) {
                work.expected[path] = work.contents(path, large: false)
                try work.write(store, path, work.expected[path]!)
            }
            try work.addReplicaChanges(round: round)
            // serve, killed at seeded moments of its work, up to a dozen times...
            for _ in 0..<12 where !converged() {
                let delay = Double(Int.random(in: 10...500, using: &work.rng)) / 1000
                let attempt = try await Self.runAndMaybeKill(cli, serve, after: delay)
                log.append(
                    "round \(round) serve: \(attempt.killed ? "killed" : "exit \(attempt.status)") after \(String(format: "%.3f", attempt.seconds)) s"
                )
                #expect(attempt.killed, "seed \(seed): serve ended by itself: \(attempt.stderr)")
                if attempt.killed { kills += 1 }
            }
            // ...then let run until the round converged, and stopped with SIGTERM.
            let last = try ServeProcess(cli, Array(serve.dropFirst()), log: temp.url.appendingPathComponent("serve-\(round).log"))
            let done = await waitUntil(timeout: 60) { converged() }
            // SIGTERM once serve is up (a signal before the process runs its code kills it).
            #expect(await waitUntil(timeout: 30) { last.output.contains("serving crash") }, "\(last.output)")
            #expect(
                done,
                "seed \(seed): round \(round) did not converge after restarts: store \(difference(files(in: store), work.expected)), replica \(difference(files(in: replica), work.expected))\n\(last.output.suffix(3000))\n\(log.joined(separator: "\n"))"
            )
            let status = await last.stop(SIGTERM, timeout: 60)
            #expect(status == 0, "seed \(seed): serve ended with \(String(describing: status)) after SIGTERM: \(last.output.suffix(2000))")
            if !done { break }
        }

        try await finalChecks(cli, work, seed: seed, log: log)
        #expect(kills >= 30, "seed \(seed): only \(kills) kills of serve")
        print(
            "serve crash seed \(seed): \(kills) kills over \(round) rounds, \(work.expected.count) files, \(String(format: "%.1f", Date().timeIntervalSince(started))) s"
        )
    }

    /// A clean sync, everything materialized, a last sync that must change nothing; then the
    /// store holds exactly the expected files, the replica equals it, no staging files are left,
    /// the database is intact and the journal empty.
    func finalChecks(_ cli: CLIRunner, _ work: CrashWorkload, seed: UInt64, log: [String]) async throws {
        let final = try await cli.run(["sync", "crash"])
        #expect(final.status == 0, "seed \(seed): \(final.stderr)")
        let everything = try await cli.run(["materialize", "-R", "crash:/"])
        #expect(everything.status == 0, "seed \(seed): \(everything.stderr)")
        let quiet = try #require(try await cli.json(["sync", "crash"]) as? [String: Any])
        let report = try #require((quiet["reports"] as? [[String: Any]])?.first)
        for key in ["uploaded", "conflicts", "added", "updated", "moved", "deleted", "downloaded"] {
            #expect(report[key] as? Int == 0, "seed \(seed): the last sync still had \(key) = \(report[key] ?? "nil")")
        }

        let storeFiles = files(in: work.store)
        let replicaFiles = files(in: work.replica)
        let missing = Set(work.expected.keys).subtracting(storeFiles.keys).sorted()
        let extra = Set(storeFiles.keys).subtracting(work.expected.keys).sorted()
        let wrong = work.expected.keys.filter { storeFiles[$0] != nil && storeFiles[$0] != work.expected[$0] }.sorted()
        #expect(missing.isEmpty, "seed \(seed): lost in the store: \(missing)\n\(log.joined(separator: "\n"))")
        if !extra.isEmpty { print("conflicts log:\n" + ((try? await cli.run(["conflicts", "crash"]).stdout) ?? "")) }
        #expect(extra.isEmpty, "seed \(seed): duplicated or stray in the store: \(extra)\n\(log.joined(separator: "\n"))")
        #expect(wrong.isEmpty, "seed \(seed): wrong contents in the store: \(wrong)")
        #expect(
            replicaFiles == storeFiles,
            "seed \(seed): the replica differs from the store: \(Set(replicaFiles.keys).symmetricDifference(storeFiles.keys).sorted())")
        let staging = cli.home.appendingPathComponent("staging")
        #expect(files(in: staging).isEmpty, "seed \(seed): staging files left: \(files(in: staging).keys.sorted())")

        let database = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        #expect(try database.integrityCheck() == "ok", "seed \(seed)")
        let domain = try #require(try database.domain(named: "crash"))
        #expect(try database.unfinishedOperations(domainID: domain.id!).isEmpty, "seed \(seed): unfinished journal entries")
    }

    /// What differs between found files and expected ones, in words.
    func difference(_ found: [String: Data], _ expected: [String: Data]) -> String {
        let missing = Set(expected.keys).subtracting(found.keys).sorted()
        let extra = Set(found.keys).subtracting(expected.keys).sorted()
        let wrong = expected.keys.filter { found[$0] != nil && found[$0] != expected[$0] }.sorted()
        return
            "missing \(missing.prefix(20)) (\(missing.count)), extra \(extra.prefix(20)) (\(extra.count)), different \(wrong.prefix(20)) (\(wrong.count))"
    }

    /// Every file below `root` (hidden ones too), by relative path, with its bytes; placeholders
    /// are listed under their own names, so a leftover placeholder shows up as a difference.
    func files(in root: URL) -> [String: Data] {
        var result: [String: Data] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root.path) else { return result }
        while let relative = walker.nextObject() as? String {
            let url = root.appendingPathComponent(relative)
            var info = stat()
            guard lstat(url.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            result[relative] = (try? Data(contentsOf: url)) ?? Data()
        }
        return result
    }

    /// Starts the binary (with `environment` added) and sends SIGKILL after `delay` seconds
    /// unless it ended before.
    static func runAndMaybeKill(
        _ cli: CLIRunner, _ arguments: [String], environment: [String: String] = [:], after delay: Double
    ) async throws -> Attempt {
        let process = TestProcess()
        cli.configure(process, arguments, environment: environment)
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-crash-stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errors) }
        let errorHandle = try FileHandle(forWritingTo: errors)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errorHandle
        let exited = ProcessExit(process)
        let start = Date()
        try process.run()
        // The delay is the experiment (when the process dies), not a wait for a result. The kill
        // is sent from the waiting thread itself: resumed on the cooperative pool, the kill came
        // 25 s late in CI while other suites' setup loops held both pool threads, and the run had
        // ended by itself.
        let pid = process.processIdentifier
        let killed = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let ended = exited.wait(seconds: delay)
                if !ended {
                    kill(pid, SIGKILL)
                    _ = exited.wait(seconds: 60)
                }
                continuation.resume(returning: !ended)
            }
        }
        // The error file's handle is ProcessExit's to close (it does when the process ends).
        let seconds = Date().timeIntervalSince(start)
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        // Still running a minute after SIGKILL: reported as such, never read as ended
        // (Foundation traps when asked for the status of a running process).
        let termination = exited.termination
        #expect(termination != nil, "\(arguments) still runs a minute after SIGKILL")
        return Attempt(
            killed: killed && termination?.signaled == true, killSent: killed, status: termination?.status ?? -1,
            stderr: stderr, seconds: seconds)
    }
}

/// The files of one crash experiment: seeded contents written to the store and the replica,
/// and what the store must hold at the end.
final class CrashWorkload {
    var rng: CrashTests.Generator
    let store: URL
    let replica: URL
    /// What the store must hold at the end, by path.
    var expected: [String: Data] = [:]
    private var serial = 0

    init(seed: UInt64, store: URL, replica: URL) {
        rng = CrashTests.Generator(state: seed)
        self.store = store
        self.replica = replica
    }

    /// Seeded bytes, unique by their first line; 1–2.5 MB when `large`, else up to 20 KB.
    func contents(_ path: String, large: Bool) -> Data {
        serial += 1
        let size = large ? Int.random(in: 1_000_000...2_500_000, using: &rng) : Int.random(in: 0...20_000, using: &rng)
        var bytes = [UInt8](repeating: 0, count: size)
        var word = rng.next()
        for index in 0..<size {
            if index % 8 == 0 { word = rng.next() }
            bytes[index] = UInt8(truncatingIfNeeded: word >> ((index % 8) * 8))
        }
        return Data("\(serial) \(path)\n".utf8) + Data(bytes)
    }

    /// Writes a file, making its folders.
    func write(_ root: URL, _ path: String, _ data: Data) throws {
        let url = root.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    /// 300 new files in the store below `folder` (in 7 subfolders, every 60th MB-sized).
    func addStoreFiles(below folder: String) throws {
        for index in 0..<300 {
            let path = "\(folder)/d\(index % 7)/file \(index) ü.bin"
            expected[path] = contents(path, large: index % 60 == 0)
            try write(store, path, expected[path]!)
        }
    }

    /// 300 new files in the replica below `up<round>`, 20 edits and 10 renames of earlier ones,
    /// and from the second round on a folder of the previous round renamed with everything in it.
    func addReplicaChanges(round: Int) throws {
        for index in 0..<300 {
            let path = "up\(round)/u\(index % 5)/new \(index).dat"
            expected[path] = contents(path, large: index % 60 == 0)
            try write(replica, path, expected[path]!)
        }
        let earlier = expected.keys.filter { $0.hasPrefix("up") && !$0.hasPrefix("up\(round)/") }.sorted()
        for path in earlier.shuffled(using: &rng).prefix(20) {
            expected[path] = contents(path, large: false)
            try write(replica, path, expected[path]!)
        }
        for path in earlier.shuffled(using: &rng).prefix(10)
        where FileManager.default.fileExists(atPath: replica.appendingPathComponent(path).path) {
            let renamed = (path as NSString).deletingLastPathComponent + "/renamed \(round) " + (path as NSString).lastPathComponent
            guard expected[renamed] == nil else { continue }
            try FileManager.default.moveItem(at: replica.appendingPathComponent(path), to: replica.appendingPathComponent(renamed))
            expected[renamed] = expected.removeValue(forKey: path)
        }
        if round > 1 {
            let from = "up\(round - 1)/u\(round % 5)"
            let to = "up\(round - 1)/moved \(round)"
            try FileManager.default.moveItem(at: replica.appendingPathComponent(from), to: replica.appendingPathComponent(to))
            for key in expected.keys where key.hasPrefix(from + "/") {
                expected[to + key.dropFirst(from.count)] = expected.removeValue(forKey: key)
            }
        }
    }
}
