import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The external-program points of issue #34 through the real binary, with
/// `fileprovider-backend-liar` (Tests/Fixtures/ExternalBackends).
@Suite struct LiarBackendCLITests {
    static let liar = ExternalBackendCLITests.fixtures + "/fileprovider-backend-liar"

    /// A folder first on PATH holding a copy of the liar named `fileprovider-backend-NAME`
    /// (a copy, so that changing it changes no other test's program); the environment.
    static func program(_ temp: TemporaryFolder, named name: String) throws -> (environment: [String: String], path: URL) {
        let folder = temp.url.appendingPathComponent("liar-bin")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("fileprovider-backend-" + name)
        try Data(contentsOf: URL(fileURLWithPath: liar)).write(to: path)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path.path)
        var environment = ExternalBackendCLITests.environment(temp)
        environment["PATH"] = folder.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        return (environment, path)
    }

    static func isRunning(_ pid: pid_t) -> Bool { kill(pid, 0) == 0 || errno != ESRCH }

    /// A program that ignores the end of its input is ended before the command exits.
    @Test(.timeLimit(.minutes(2))) func noProgramIsLeftRunningAfterACommand() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let (environment, _) = try Self.program(temp, named: "liar")
        let pidfile = temp.url.appendingPathComponent("program.pid").path
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "stubborn", "--backend", "liar", "--behaviour", "ignore-eof", "--pidfile",
                pidfile,
            ],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        for command in [["sync", "stubborn"]] {
            try? FileManager.default.removeItem(atPath: pidfile)
            let result = try await cli.run(command, environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            let pid = try #require(pid_t(String(decoding: try Data(contentsOf: URL(fileURLWithPath: pidfile)), as: UTF8.self)))
            let running = Self.isRunning(pid)
            if running { kill(pid, SIGKILL) }
            #expect(!running, "\(command.joined(separator: " ")) left the program running")
        }
    }

    /// A program that does not answer `hello` holds `status` and `domain list` a few seconds
    /// at most (was 30 s each), and they say why the backend is not available.
    @Test(.timeLimit(.minutes(2))) func statusAndDomainListDoNotWaitForAProgramThatDoesNotAnswer() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        var (environment, path) = try Self.program(temp, named: "liar")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "mute", "--backend", "liar"], environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        // The program's file changes (its remembered description is stale) and it now hangs.
        let handle = try FileHandle(forWritingTo: path)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("# changed\n".utf8))
        try handle.close()
        environment["LIAR_BEHAVIOUR"] = "hello-hang"
        // Only this program to describe (on a loaded machine each other one found on PATH
        // costs a start of its own).
        environment["PATH"] = path.deletingLastPathComponent().path + ":" + ExternalBackendCLITests.systemPython + "/bin"
        for command in [["status"], ["domain", "list"]] {
            let started = Date()
            let result = try await cli.run(command, environment: environment)
            let elapsed = Date().timeIntervalSince(started)
            #expect(result.status == 0, "\(result.stderr)")
            // The program is given 3 s (it was 30 s): the message names the 3 s; the time bound
            // leaves room for a loaded machine's program starts.
            #expect(elapsed < 45, "\(command.joined(separator: " ")) took \(elapsed) s")
            #expect(result.stdout.contains("within 3 s"), "\(result.stdout)")
            #expect(result.stdout.contains("backend not available"), "\(result.stdout)")
            #expect(result.stdout.contains("is not answering"), "\(result.stdout)")
        }
    }

    /// `backend list`: a summary with a line break forges no line; an option `domain add` has
    /// itself is refused with a clear message; a program whose `describe` now fails is shown
    /// failing, and what it said before is forgotten.
    @Test func backendListShowsWhatDescribeSaysNow() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        var (environment, _) = try Self.program(temp, named: "liar-describe-newline")
        _ = try Self.program(temp, named: "liar-describe-reserved")
        _ = try Self.program(temp, named: "liar-describe-fails-if")
        let failFile = temp.url.appendingPathComponent("fail").path
        environment["LIAR_FAIL_FILE"] = failFile

        let listed = try await cli.run(["backend", "list"], environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n")
        #expect(!lines.contains { $0.hasPrefix("fake") }, "\(listed.stdout)")
        #expect(!lines.contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix("--forged") }, "\(listed.stdout)")
        #expect(listed.stdout.contains("cannot describe it: fileprovider-backend-liar-describe-reserved describes an option --mode"))
        #expect(listed.stdout.contains("lies, crashes and hangs"))

        let entry = temp.url.appendingPathComponent("cache/fileprovider/backends/liar-describe-fails-if.json")
        #expect(FileManager.default.fileExists(atPath: entry.path))
        _ = FileManager.default.createFile(atPath: failFile, contents: nil)
        let failing = try await cli.run(["backend", "list", "--json"], environment: environment)
        #expect(failing.status == 0, "\(failing.stderr)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(failing.stdout.utf8)) as? [[String: Any]])
        let failed = try #require(entries.first { $0["kind"] as? String == "liar-describe-fails-if" })
        #expect(failed["summary"] == nil)
        #expect((failed["error"] as? String)?.contains("cannot read my settings") == true, "\(failed)")
        #expect(!FileManager.default.fileExists(atPath: entry.path), "the old description is still remembered")
    }

    /// `domain add --help`'s own options are all reserved: a program cannot declare one.
    @Test func everyOptionOfDomainAddIsReserved() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let help = try await cli.run(["domain", "add", "--help"], withHome: false)
        // The option lines of the OPTIONS section: `  -v, --verbose`, `  --mode <mode>`.
        let section = try #require(help.stdout.components(separatedBy: "OPTIONS:").last)
        var names: Set<String> = []
        for line in section.split(separator: "\n") where line.trimmingCharacters(in: .whitespaces).hasPrefix("-") {
            // `--[no-]progress` is `--progress/--no-progress` in --help.
            for word in line.split(separator: " ").prefix(3).flatMap({ $0.split(separator: "/") }) where word.hasPrefix("--") {
                names.insert(String(word.dropFirst(2)).trimmingCharacters(in: CharacterSet(charactersIn: ",<>")))
            }
        }
        #expect(names.contains("mode") && names.contains("no-progress"), "\(help.stdout)")
        let reserved: Set<String> = [
            "backend", "replica", "ignore", "mode", "on-access", "cache-budget", "hydration", "adopt-replica", "sync", "progress",
            "no-progress", "home", "verbose", "quiet", "log-level", "log-file", "json", "help", "version",
        ]
        #expect(names.isSubset(of: reserved), "not reserved: \(names.subtracting(reserved).sorted())")
    }
}

extension LiarBackendCLITests {
    /// A program started only to describe itself (`status` with a stale description) and never
    /// used is ended before the command exits, also when it ignores the end of its input.
    @Test(.timeLimit(.minutes(2))) func aProgramStartedToDescribeItselfIsNotLeftRunning() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        var (environment, path) = try Self.program(temp, named: "liar")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "described", "--backend", "liar"], environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let handle = try FileHandle(forWritingTo: path)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("# changed\n".utf8))
        try handle.close()
        let pidfile = temp.url.appendingPathComponent("described.pid").path
        environment["LIAR_BEHAVIOUR"] = "ignore-eof"
        environment["LIAR_PIDFILE"] = pidfile
        let status = try await cli.run(["status"], environment: environment)
        #expect(status.status == 0, "\(status.stderr)")
        let pid = try #require(pid_t(String(decoding: try Data(contentsOf: URL(fileURLWithPath: pidfile)), as: UTF8.self)))
        let running = Self.isRunning(pid)
        if running { kill(pid, SIGKILL) }
        #expect(!running, "status left the program it described running")
    }
}

extension LiarBackendCLITests {
    /// One bad item leaves out that item, with a warning naming it; its folder syncs. (Before:
    /// the whole root failed, quoting the first, innocent item.)
    @Test func aSyncLeavesOutOnlyTheBadItemsWithAWarningForEach() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let (environment, _) = try Self.program(temp, named: "liar")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "mixed", "--backend", "liar", "--behaviour", "bad-items"],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let synced = try await cli.run(["sync", "mixed"], environment: environment)
        // Items skipped: a partial sync (exit 3).
        #expect(synced.status == 3, "\(synced.stderr)")
        for (name, what) in [
            ("huge", "its size"), ("fraction", "its size"), ("far", "its modification date"), ("?", "identifier /surrogate"),
            ("alias", "unknown kind"), ("copy.txt", "came earlier"),
        ] {
            let warning = synced.stderr.split(separator: "\n").first { $0.contains("skipped an item: \"\(name)\"") }
            #expect(warning?.contains(what) == true, "\(name): \(synced.stderr)")
        }
        let listed = try await cli.run(["ls", "mixed:/", "--json"], environment: environment)
        let items = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(Set(items.compactMap { $0["path"] as? String }) == ["/a.txt", "/z.txt"])
    }

    /// A program that dies while a folder below the root is listed: what was listed is synced,
    /// the sync says the store stopped answering and exits 1, and the domain backs off (was:
    /// a warning, exit 0, no backoff).
    @Test(.timeLimit(.minutes(2))) func aDeathDuringASubfolderListingIsAFailureThatBacksOff() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let (environment, _) = try Self.program(temp, named: "liar")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "dying", "--backend", "liar", "--behaviour", "die-in-subfolder"],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let synced = try await cli.run(["sync", "dying"], environment: environment)
        #expect(synced.status == 1, "\(synced.stdout) \(synced.stderr)")
        #expect(synced.stderr.contains("error: dying: the store stopped answering during the sync"), "\(synced.stderr)")
        #expect(synced.stderr.contains("exit status 9") || synced.stderr.contains("dying in a subfolder"), "\(synced.stderr)")
        let status = try await cli.run(["status", "dying", "--json"], environment: environment)
        #expect(status.stdout.contains("nextRetryAt") || status.stdout.contains("backoff"), "\(status.stdout)")
    }
}
