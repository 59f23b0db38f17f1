import Foundation
import Testing

/// Bad input gets a clear error, the right exit code, and changes nothing.
@Suite struct BadInputTests {
    let temp: TemporaryFolder
    let cli: CLIRunner

    init() throws {
        temp = try TemporaryFolder()
        cli = CLIRunner(home: temp.url.appendingPathComponent("home"))
        try temp.write("src/a.txt", Data("a".utf8))
        let added = try cli.run(["domain", "add", "good", "--backend", "local", "--root", temp.url.appendingPathComponent("src").path])
        #expect(added.status == 0)
        try cli.run(["sync"])
    }

    /// The whole database as `dump` prints it, for before/after comparisons.
    func snapshot() throws -> String {
        try cli.run(["dump", "good"]).stdout + (try cli.run(["domain", "list", "--json"]).stdout)
    }

    @Test func unknownDomain() throws {
        let before = try snapshot()
        let result = try cli.run(["ls", "nope:/"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("no domain named 'nope'"))
        #expect(result.stderr.contains("good"))
        #expect(try snapshot() == before)
    }

    @Test(arguments: ["bad/name", "bad:name", "", ".hidden", "with space"])
    func invalidDomainName(_ name: String) throws {
        let before = try snapshot()
        let result = try cli.run(["domain", "add", name, "--backend", "local", "--root", temp.url.appendingPathComponent("src").path])
        #expect(result.status == 2)
        #expect(result.stderr.contains("invalid domain name"))
        #expect(try snapshot() == before)
    }

    @Test func pathOutsideEveryReplica() throws {
        let before = try snapshot()
        let result = try cli.run(["materialize", "/etc/hostname"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("not inside any domain's replica"))
        #expect(try snapshot() == before)
    }

    @Test func rootThatDoesNotExist() throws {
        let before = try snapshot()
        let result = try cli.run(["domain", "add", "other", "--backend", "local", "--root", temp.url.appendingPathComponent("missing").path])
        #expect(result.status != 0)
        #expect(result.stderr.contains("missing"))
        #expect(try snapshot() == before)
        #expect(!FileManager.default.fileExists(atPath: cli.home.appendingPathComponent("domains/other").path))
    }

    @Test func evictingAPinnedFile() throws {
        #expect(try cli.run(["pin", "good:/a.txt"]).status == 0)
        let before = try snapshot()
        let result = try cli.run(["evict", "good:/a.txt"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("pinned"))
        #expect(try snapshot() == before)
        #expect(FileManager.default.fileExists(atPath: cli.home.appendingPathComponent("domains/good/a.txt").path))
    }

    @Test func missingRequiredOptionAndUnknownBackend() throws {
        let missing = try cli.run(["domain", "add", "x", "--backend", "local"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("--root"))
        let unknown = try cli.run(["domain", "add", "x", "--backend", "ftp", "--root", "/tmp"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("known backends"))
    }

    @Test func usageErrorsExitWithTwo() throws {
        let result = try cli.run(["ls", "good:/", "--no-such-flag"])
        #expect(result.status == 2)
    }

    @Test func dotDotInPathsIsRefused() throws {
        let result = try cli.run(["ls", "good:/../etc"])
        #expect(result.status == 2)
        #expect(result.stderr.contains(".."))
    }

    @Test func helpExplainsCommandsAndBackendOptions() throws {
        let help = try cli.run(["--help"], withHome: false)
        #expect(help.status == 0)
        for command in ["domain", "sync", "ls", "materialize", "evict", "pin", "unpin", "status", "dump"] {
            #expect(help.stdout.contains(command))
        }
        let add = try cli.run(["domain", "add", "--help"], withHome: false)
        #expect(add.status == 0)
        #expect(add.stdout.contains("--root"))
        #expect(add.stdout.contains("Backend 'local'"))
    }
}
