import Foundation
import Testing

/// External backends through the real binary: the Python reference backend found on PATH,
/// `backend list`, `backend test`, a domain of it end to end, and a program that crashes.
@Suite struct ExternalBackendCLITests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let pythonBackends = repository.appendingPathComponent("Backends/python").path
    static let fixtures = repository.appendingPathComponent("Tests/Fixtures/ExternalBackends").path

    /// PATH with the Python reference backend and the hostile fixture first, then `/usr/bin`
    /// when it has `python3` (their `#!/usr/bin/env python3` then runs the system's python3,
    /// not a version manager's shim further on, which costs ~0.2 s a start; `backend test`
    /// starts a program ~80 times); the C reference backend in the backends folder
    /// (`$XDG_DATA_HOME/fileprovider/backends`), as a link to the one `swift build` made beside
    /// the binary.
    static func environment(_ temp: TemporaryFolder) -> [String: String] {
        let backends = temp.url.appendingPathComponent("xdg/fileprovider/backends")
        try? FileManager.default.createDirectory(at: backends, withIntermediateDirectories: true)
        let cfolder = CLIRunner.locateBinary().deletingLastPathComponent().appendingPathComponent("fileprovider-backend-cfolder")
        try? FileManager.default.createSymbolicLink(
            atPath: backends.appendingPathComponent("fileprovider-backend-cfolder").path, withDestinationPath: cfolder.path)
        return [
            "PATH": "\(pythonBackends):\(fixtures):\(systemPython)\(ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")",
            "XDG_DATA_HOME": temp.url.appendingPathComponent("xdg").path,
            // The programs' descriptions are remembered here, not in the user's cache.
            "XDG_CACHE_HOME": temp.url.appendingPathComponent("cache").path,
        ]
    }

    /// `/usr/bin:` when `/usr/bin/python3` is there, else nothing.
    static let systemPython = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin:" : ""

    @Test func backendListShowsBuiltInAndExternal() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let listed = try await cli.run(["backend", "list", "--json"], environment: Self.environment(temp))
        #expect(listed.status == 0, "\(listed.stderr)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        let local = try #require(entries.first { $0["kind"] as? String == "local" })
        #expect(local["origin"] as? String == "built-in")
        let pyfolder = try #require(entries.first { $0["kind"] as? String == "pyfolder" })
        #expect(pyfolder["origin"] as? String == "external")
        #expect(pyfolder["path"] as? String == Self.pythonBackends + "/fileprovider-backend-pyfolder")
        let options = try #require(pyfolder["options"] as? [[String: Any]])
        #expect(options.first?["name"] as? String == "root")
        #expect(options.first?["required"] as? Bool == true)

        let cfolder = try #require(entries.first { $0["kind"] as? String == "cfolder" })
        #expect((cfolder["path"] as? String)?.hasSuffix("xdg/fileprovider/backends/fileprovider-backend-cfolder") == true)
        #expect(cfolder["summary"] as? String == "a local folder, through the reference external backend in C")

        let text = try await cli.run(["backend", "list"], environment: Self.environment(temp))
        #expect(text.status == 0)
        #expect(text.stdout.contains("pyfolder  external  \(Self.pythonBackends)/fileprovider-backend-pyfolder"))
        #expect(text.stdout.contains("--root <path>"))
    }

    @Test func backendTestPassesForPyfolder() async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        let cli = CLIRunner(in: temp)
        let checks = ["enumerateEmptyRoot", "roundTripSeveralMiB", "moveFolderWithChildren", "partialReadsAtStartMiddleAndEnd"]
        let result = try await cli.run(
            ["backend", "test", "pyfolder", "--option", "root=\(store.path)", "--json"] + checks.flatMap { ["--check", $0] },
            environment: Self.environment(temp))
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(report["passed"] as? Int == checks.count)
        #expect(report["failed"] as? Int == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.path).isEmpty, "backend test left items behind")

        let text = try await cli.run(
            ["backend", "test", "pyfolder", "--option", "root=\(store.path)", "--check", "renameFile"],
            environment: Self.environment(temp))
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("ok    renameFile"))
        #expect(text.stdout.contains("pyfolder: 1 of 1 checks passed"))
    }

    @Test func backendTestPassesForCfolder() async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        let cli = CLIRunner(in: temp)
        let result = try await cli.run(
            ["backend", "test", "cfolder", "--option", "root=\(store.path)"], environment: Self.environment(temp))
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("checks passed") && !result.stdout.contains("failed"), "\(result.stdout)")
        #expect(!result.stdout.contains("FAIL"), "\(result.stdout)")
    }

    @Test func backendTestReportsFailuresAndRefusesAStoreWithData() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("store/keep.txt", Data("mine".utf8))
        let refused = try await cli.run(
            ["backend", "test", "pyfolder", "--option", "root=\(temp.url.appendingPathComponent("store").path)"],
            environment: Self.environment(temp))
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("the store is not empty"))
        #expect(FileManager.default.fileExists(atPath: temp.url.appendingPathComponent("store/keep.txt").path))

        // A store that can only list its empty root: one check passes, the other fails, with
        // a report and exit status 1.
        let failing = try await cli.run(
            ["backend", "test", "hostile", "--option", "behaviour=empty", "--check", "enumerateEmptyRoot", "--check", "createFolder"],
            environment: Self.environment(temp))
        #expect(failing.status == 1, "\(failing.stdout)\n\(failing.stderr)")
        #expect(failing.stdout.contains("ok    enumerateEmptyRoot"))
        #expect(failing.stdout.contains("FAIL  createFolder: unexpected error: notSupported: this store can do nothing"))
        #expect(failing.stdout.contains("hostile: 1 of 2 checks passed, 1 failed"))
    }

    @Test func pyfolderDomainSyncsAndMaterializes() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = Self.environment(temp)
        let contents = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try temp.write("store/photos/beach.jpg", contents)
        try temp.write("store/readme.txt", Data("hello\n".utf8))
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "docs", "--backend", "pyfolder", "--root",
                temp.url.appendingPathComponent("store").path,
            ],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let synced = try await cli.run(["sync", "docs"], environment: environment)
        #expect(synced.status == 0, "\(synced.stderr)")
        let listed = try await cli.run(["ls", "docs:/", "-R", "--json"], environment: environment)
        let items = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(Set(items.compactMap { $0["path"] as? String }) == ["/photos", "/photos/beach.jpg", "/readme.txt"])

        let materialized = try await cli.run(["materialize", "docs:/photos/beach.jpg"], environment: environment)
        #expect(materialized.status == 0, "\(materialized.stderr)")
        let replica = cli.home.appendingPathComponent("domains/docs")
        #expect(try Data(contentsOf: replica.appendingPathComponent("photos/beach.jpg")) == contents)

        // A local edit goes up through the program.
        try Data("new\n".utf8).write(to: replica.appendingPathComponent("new.txt"))
        let up = try await cli.run(["sync", "docs"], environment: environment)
        #expect(up.status == 0, "\(up.stderr)")
        #expect(try Data(contentsOf: temp.url.appendingPathComponent("store/new.txt")) == Data("new\n".utf8))
    }

    @Test func crashingProgramGivesAClearError() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = Self.environment(temp)
        // It answers for the root, so the domain is added; its listing then crashes it.
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "bad", "--backend", "hostile", "--behaviour", "crash"],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let synced = try await cli.run(["sync", "bad"], environment: environment)
        #expect(synced.status == 1)
        #expect(synced.stderr.contains("fileprovider-backend-hostile"), "\(synced.stderr)")
        #expect(synced.stderr.contains("exit status 3"), "\(synced.stderr)")
        #expect(synced.stderr.contains("about to crash on purpose"), "\(synced.stderr)")
    }

    @Test func missingProgramIsNamed() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "x", "--backend", "no-such-backend", "--root", temp.url.path],
            environment: Self.environment(temp))
        #expect(added.status == 2)
        #expect(added.stderr.contains("unknown backend 'no-such-backend'"), "\(added.stderr)")
    }
}
