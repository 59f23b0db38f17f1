import Foundation
import Testing

/// Bad input gets a clear error, the right exit code, and changes nothing.
@Suite struct BadInputTests {
    let temp: TemporaryFolder
    let cli: CLIRunner

    init() async throws {
        temp = try TemporaryFolder()
        cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
        try await cli.addLocalDomain("good", root: temp.url.appendingPathComponent("src"))
        try await cli.run(["sync"])
    }

    /// The whole database as `dump` prints it, for before/after comparisons.
    func snapshot() async throws -> String {
        try await cli.run(["dump", "good"]).stdout + (try await cli.run(["domain", "list", "--json"]).stdout)
    }

    @Test func unknownDomain() async throws {
        let before = try await snapshot()
        let result = try await cli.run(["ls", "nope:/"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("no domain named 'nope'"))
        #expect(result.stderr.contains("good"))
        #expect(try await snapshot() == before)
    }

    @Test(arguments: ["bad/name", "bad:name", "", ".hidden", "with space"])
    func invalidDomainName(_ name: String) async throws {
        let before = try await snapshot()
        let result = try await cli.run([
            "domain", "add", "--mode", "placeholder-files", name, "--backend", "local", "--root",
            temp.url.appendingPathComponent("src").path,
        ])
        #expect(result.status == 2)
        #expect(result.stderr.contains("invalid domain name"))
        #expect(try await snapshot() == before)
    }

    @Test func pathOutsideEveryReplica() async throws {
        let before = try await snapshot()
        let result = try await cli.run(["materialize", "/etc/hostname"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("not inside any domain's replica"))
        #expect(try await snapshot() == before)
    }

    @Test func rootThatDoesNotExist() async throws {
        let before = try await snapshot()
        let result = try await cli.run([
            "domain", "add", "--mode", "placeholder-files", "other", "--backend", "local", "--root",
            temp.url.appendingPathComponent("missing").path,
        ])
        #expect(result.status != 0)
        #expect(result.stderr.contains("missing"))
        #expect(try await snapshot() == before)
        #expect(!FileManager.default.fileExists(atPath: cli.home.appendingPathComponent("domains/other").path))
    }

    @Test func evictingAPinnedFile() async throws {
        #expect(try await cli.run(["pin", "good:/a.txt"]).status == 0)
        let before = try await snapshot()
        let result = try await cli.run(["evict", "good:/a.txt"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("pinned"))
        #expect(try await snapshot() == before)
        #expect(FileManager.default.fileExists(atPath: cli.home.appendingPathComponent("domains/good/a.txt").path))
    }

    @Test func missingRequiredOptionAndUnknownBackend() async throws {
        let missing = try await cli.run(["domain", "add", "--mode", "placeholder-files", "x", "--backend", "local"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("--root"))
        let unknown = try await cli.run(["domain", "add", "--mode", "placeholder-files", "x", "--backend", "ftp", "--root", "/tmp"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("known backends"))
    }

    @Test func usageErrorsExitWithTwo() async throws {
        let result = try await cli.run(["ls", "good:/", "--no-such-flag"])
        #expect(result.status == 2)
    }

    @Test func dotDotInPathsIsRefused() async throws {
        let result = try await cli.run(["ls", "good:/../etc"])
        #expect(result.status == 2)
        #expect(result.stderr.contains(".."))
    }

    @Test func helpExplainsCommandsAndBackendOptions() async throws {
        let help = try await cli.run(["--help"], withHome: false)
        #expect(help.status == 0)
        for command in ["domain", "sync", "ls", "materialize", "evict", "pin", "unpin", "status", "dump"] {
            #expect(help.stdout.contains(command))
        }
        let add = try await cli.run(["domain", "add", "--help"], withHome: false)
        #expect(add.status == 0)
        #expect(add.stdout.contains("--root"))
        #expect(add.stdout.contains("Backend 'local'"))
    }
}
