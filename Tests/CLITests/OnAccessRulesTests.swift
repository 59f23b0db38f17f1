import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Access rules by program through the real `fileproviderctl serve`, the real kernel (fanotify,
/// as the other on-access suites: root, Linux ≥ 6.14) and real programs: a program copied under
/// the name of a content indexer is refused at once (EPERM) and nothing is fetched — counted at
/// the store, whose file opens `inotifywait` reports — while `cat` of the same file reads it; a
/// present-only program reads a downloaded file and is refused a missing one.
@Suite("On-access rules by program", .serialized, .timeLimit(.minutes(10)))
struct OnAccessRulesTests {
    /// Opens of files in the store's folder, as `inotifywait -m -e open` reports them: each
    /// backend fetch opens the store's file. inotify merges identical events that follow each
    /// other unread, so this tells whether a file was opened between two marks, not how often.
    final class StoreOpens {
        let process = TestProcess()
        let exit: ProcessExit
        let log: URL
        let folder: String
        private var marks = 0

        init(folder: String, temp: TemporaryFolder) async throws {
            self.folder = folder
            log = temp.url.appendingPathComponent("store-opens.log")
            let errors = temp.url.appendingPathComponent("store-opens.err")
            for url in [log, errors] { _ = FileManager.default.createFile(atPath: url.path, contents: nil) }
            process.executableURL = URL(fileURLWithPath: "/usr/bin/inotifywait")
            process.arguments = ["-m", "-e", "open", "--format", "%f", folder]
            process.standardOutput = try FileHandle(forWritingTo: log)
            process.standardError = try FileHandle(forWritingTo: errors)
            exit = ProcessExit(process)
            try process.run()
            let ready = await waitUntil(timeout: 30) {
                ((try? String(contentsOf: errors, encoding: .utf8)) ?? "").contains("Watches established")
            }
            try #require(ready, "inotifywait did not start: \((try? String(contentsOf: errors, encoding: .utf8)) ?? "")")
        }

        /// The names opened so far, in order.
        var opened: [String] {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        /// Opens a file of its own in the folder and waits until its open is reported: every
        /// open before it is reported then too (inotify keeps order). Returns the names opened
        /// since the last mark.
        func sinceLastMark() async throws -> [String] {
            marks += 1
            let name = ".mark-\(marks)"
            let before = opened.count
            try Data().write(to: URL(fileURLWithPath: folder + "/" + name))
            let seen = await waitUntil(timeout: 30) { self.opened.contains(name) }
            try #require(seen, "inotifywait did not report \(name)")
            let all = opened
            let end = try #require(all.lastIndex(of: name))
            let previous = all[..<end].lastIndex { $0.hasPrefix(".mark-") }.map { $0 + 1 } ?? 0
            _ = before
            return all[previous..<end].filter { !$0.isEmpty && !$0.hasPrefix(".mark-") }
        }

        deinit {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            exit.wait()
        }
    }

    /// `/bin/cat` copied to `folder/name`: a program of that name.
    static func program(named name: String, in temp: TemporaryFolder) throws -> String {
        let folder = temp.url.appendingPathComponent("programs").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/" + name
        try FileManager.default.copyItem(atPath: "/bin/cat", toPath: path)
        #expect(chmod(path, 0o755) == 0)
        return path
    }

    @Test func rulesAreListedAddedReplacedAndRemovedAndBadOnesAreRefusedWithWhatToDo() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let store = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let added = try await cli.run(["domain", "add", "--mode", "placeholder-files", "d", "--backend", "local", "--root", store])
        #expect(added.status == 0, "\(added)")
        let help = try await cli.run(["rules", "--help"], withHome: false)
        #expect(help.stdout.contains("EPERM") && help.stdout.contains("present-only") && help.stdout.contains("Baloo"), "\(help.stdout)")

        // A user's rule replaces a default of the same program and scope.
        let replaced = try #require(
            try await cli.json(["rules", "add", "fetch", "--program", "baloo_file", "--json"]) as? [String: Any])
        #expect((replaced["replaced"] as? [String: Any])?["default"] as? Bool == true, "\(replaced)")
        #expect((replaced["rule"] as? [String: Any])?["default"] as? Bool == false, "\(replaced)")
        let unit = try await cli.run(["rules", "add", "deny", "--unit", "tracker-miner-fs-3.service", "--domain", "d"])
        #expect(unit.status == 0 && unit.stdout.contains("in domain d"), "\(unit)")
        let listed = try #require(try await cli.json(["rules", "list", "--domain", "d"]) as? [String: Any])
        let rules = try #require(listed["rules"] as? [[String: Any]])
        #expect(rules.contains { $0["kind"] as? String == "unit" && $0["domain"] as? String == "d" && $0["action"] as? String == "deny" })
        #expect(rules.contains { $0["value"] as? String == "baloo_file" && $0["action"] as? String == "fetch" })
        #expect(rules.filter { $0["default"] as? Bool == true }.count == 5, "\(rules)")

        // Removing names the scope: the global rule is not the domain's.
        let wrongScope = try await cli.run(["rules", "remove", "--unit", "tracker-miner-fs-3.service"])
        #expect(wrongScope.status == 1 && wrongScope.stderr.contains("--domain d"), "\(wrongScope)")
        let removed = try await cli.run(["rules", "remove", "--unit", "tracker-miner-fs-3.service", "--domain", "d"])
        #expect(removed.status == 0 && removed.stdout.contains("removed deny unit"), "\(removed)")

        // Bad rules are usage errors (exit 2) that say what to do.
        for (arguments, status, message) in [
            (["rules", "add", "deny"], Int32(2), "exactly one of"),
            (["rules", "add", "deny", "--program", "a", "--unit", "b.service"], 2, "exactly one of"),
            (["rules", "add", "maybe", "--program", "a"], 2, "fetch, deny or present-only"),
            (["rules", "add", "deny", "--executable", "bin/cat"], 2, "no absolute path"),
            (["rules", "add", "deny", "--program", "/bin/cat"], 2, "--executable"),
            (["rules", "add", "deny", "--program", "a\u{7}b"], 2, "control character"),
            (["rules", "add", "deny", "--program", "a", "--domain", "nope"], 2, "nope"),
        ] {
            let run = try await cli.run(arguments)
            #expect(run.status == status && run.stderr.contains(message), "\(arguments): \(run)")
        }
    }

    @Test func aProgramUnderAnIndexersNameIsRefusedAtOnceAndNothingIsFetchedWhileCatReadsTheFile() async throws {
        try await Self.indexerIsRefused(layout: .fanotify)
    }

    @Test func aPresentOnlyProgramReadsADownloadedFileAndIsRefusedAMissingOne() async throws {
        try await Self.presentOnlyReadsWhatIsHere(layout: .fanotify)
    }

    /// A program under an indexer's name is refused at once, nothing fetched, while `cat` reads.
    static func indexerIsRefused(layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let files = [
            "photo.bin": patterned(300_000, seed: 1), "notes.txt": patterned(5_000, seed: 2), "other.bin": patterned(70_000, seed: 3),
        ]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store, backend: "local", options: ["root": store], files: files, layout: layout)
        // The shipped defaults deny the indexers, and say so.
        let rules = try #require(try await domain.cli.json(["rules", "list"]) as? [String: Any])
        let listed = try #require(rules["rules"] as? [[String: Any]])
        let baloo = listed.first { ($0["value"] as? String) == "baloo_file" }
        #expect(baloo?["action"] as? String == "deny" && baloo?["default"] as? Bool == true, "\(listed)")
        let text = try await domain.cli.run(["rules", "list"])
        #expect(text.stdout.contains("deny  program baloo_file  (all domains, default)"), "\(text.stdout)")

        let opens = try await StoreOpens(folder: store, temp: temp)
        try await domain.startServe()
        let indexer = try program(named: "baloo_file", in: temp)
        let started = Date()
        let refused = try await runProgram([indexer, domain.replica + "/photo.bin", domain.replica + "/notes.txt"], timeout: 30)
        let elapsed = Date().timeIntervalSince(started)
        #expect(!refused.succeeded && refused.output.isEmpty, "\(refused)")
        #expect(refused.errorText.contains("Operation not permitted"), "\(refused)")
        #expect(elapsed < 20, "the refusal took \(elapsed) s")
        // Nothing fetched: no open of the store's files, no blocks, still not downloaded.
        #expect(try await opens.sinceLastMark() == [], "the store's files were opened for a denied program")
        for name in ["photo.bin", "notes.txt"] {
            #expect((fileStatus(domain.backing + "/" + name)?.st_blocks ?? 0) <= 8, "\(name) has contents")
            #expect(domain.fetches(of: name) == 0)
        }
        #expect(domain.logs.contains("denied to baloo_file"), "\(domain.logs.suffix(2000))")
        #expect(domain.logs.contains(indexer), "the log does not name the executable")

        // cat of the same file reads every byte (one fetch, seen at the store).
        let cat = try await runProgram(["cat", domain.replica + "/photo.bin"])
        #expect(cat.succeeded && cat.output == files["photo.bin"], "\(cat)")
        #expect(try await opens.sinceLastMark() == ["photo.bin"])
        #expect(await domain.fetches(of: "photo.bin", reaching: 1) == 1)
        // Downloaded now: the denied program reads it as any program (no rule guards a
        // complete file).
        let again = try await runProgram([indexer, domain.replica + "/photo.bin"])
        #expect(again.succeeded && again.output == files["photo.bin"], "\(again)")

        // why names the program and the rule; status counts the refusals.
        let why = try await domain.cli.run(["why", "d:/notes.txt"])
        #expect(why.stdout.contains("baloo_file") && why.stdout.contains("deny program baloo_file (default, all domains)"), "\(why.stdout)")
        let whyJSON = try #require(try await domain.cli.json(["why", "d:/notes.txt"]) as? [String: Any])
        let refusal = try #require(whyJSON["accessRefusal"] as? [String: Any], "\(whyJSON)")
        #expect(refusal["program"] as? String == "baloo_file" && refusal["executable"] as? String == indexer, "\(refusal)")
        let counted = try await waitUntil(timeout: 30) {
            let status = try await domain.cli.json(["status"]) as? [[String: Any]] ?? []
            let refusals = status.first?["accessRefusals"] as? [String: Any]
            return (refusals?["count"] as? Int ?? 0) >= 2
        }
        #expect(counted, "status does not count the refusals")
        let status = try await domain.cli.run(["status"])
        #expect(status.stdout.contains("refused by access rules"), "\(status.stdout)")

        // A rule of the domain overrides the global default: the program fetches there (a
        // running serve reads the rules again within a second).
        let added = try await domain.cli.run(["rules", "add", "fetch", "--program", "baloo_file", "--domain", "d"])
        #expect(added.status == 0 && added.stdout.contains("replaces") == false, "\(added)")
        let allowed = try await waitUntil(timeout: 30) {
            let run = try await runProgram([indexer, domain.replica + "/other.bin"])
            return run.succeeded && run.output == files["other.bin"]
        }
        #expect(allowed, "the domain's fetch rule did not let the program read")
        #expect(try await opens.sinceLastMark() == ["other.bin"])
        try await domain.stopServe()
    }

    /// A present-only program reads a downloaded file and is refused a missing one.
    static func presentOnlyReadsWhatIsHere(layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let files = ["here.bin": patterned(200_000, seed: 4), "missing.bin": patterned(200_000, seed: 5)]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store, backend: "local", options: ["root": store], files: files, layout: layout)
        let viewer = try program(named: "thumbnailer", in: temp)
        let added = try await domain.cli.run(["rules", "add", "present-only", "--executable", viewer, "--json"])
        #expect(added.status == 0, "\(added)")
        let materialized = try await domain.cli.run(["materialize", "d:/here.bin"])
        #expect(materialized.status == 0, "\(materialized)")
        let opens = try await StoreOpens(folder: store, temp: temp)
        try await domain.startServe()

        let here = try await runProgram([viewer, domain.replica + "/here.bin"])
        #expect(here.succeeded && here.output == files["here.bin"], "\(here)")
        let missing = try await runProgram([viewer, domain.replica + "/missing.bin"], timeout: 30)
        #expect(!missing.succeeded && missing.errorText.contains("Operation not permitted"), "\(missing)")
        #expect(try await opens.sinceLastMark() == [], "a file was fetched for a present-only program")
        #expect((fileStatus(domain.backing + "/missing.bin")?.st_blocks ?? 0) <= 8)
        #expect(domain.logs.contains("refused (missing bytes, present-only) to thumbnailer"), "\(domain.logs.suffix(2000))")
        // Any other program fetches it.
        let cat = try await runProgram(["cat", domain.replica + "/missing.bin"])
        #expect(cat.succeeded && cat.output == files["missing.bin"], "\(cat)")
        #expect(try await opens.sinceLastMark() == ["missing.bin"])
        try await domain.stopServe()
    }
}

/// The same rules through the FUSE layout (`AccessGate` asked by `ReplicaFileSystem`); in the
/// Makefile's second process with the other FUSE suites.
@Suite("On-access rules by program through FUSE", .serialized, .timeLimit(.minutes(10)))
struct FUSEAccessRulesTests {
    @Test func aProgramUnderAnIndexersNameIsRefusedAtOnceAndNothingIsFetchedWhileCatReadsTheFile() async throws {
        try await OnAccessRulesTests.indexerIsRefused(layout: .fuse)
    }

    @Test func aPresentOnlyProgramReadsADownloadedFileAndIsRefusedAMissingOne() async throws {
        try await OnAccessRulesTests.presentOnlyReadsWhatIsHere(layout: .fuse)
    }
}
