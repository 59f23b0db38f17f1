import Foundation
import Testing

/// `--home`, `--json`, `-v`, `-q` and `--log-level` before or after the subcommand; `--version`,
/// `-V` and `version`.
@Suite struct GlobalOptionsTests {
    let temp: TemporaryFolder
    let cli: CLIRunner

    init() async throws {
        temp = try TemporaryFolder()
        cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))
    }

    var home: String { cli.home.path }

    @Test func optionsBeforeTheSubcommandMeanWhatTheyMeanAfterIt() async throws {
        let after = try await cli.run(["domain", "list", "--json", "--home", home], withHome: false)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(after.stdout.contains("\"name\":\"d\""))
        for arguments in [
            ["--json", "--home", home, "domain", "list"],
            ["--home=\(home)", "--json", "domain", "list"],
            ["--home", home, "domain", "--json", "list"],
            ["domain", "--home", home, "list", "--json"],
            ["-q", "--json", "--home", home, "domain", "list", "-v"],
        ] {
            let result = try await cli.run(arguments, withHome: false)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(result.stdout == after.stdout, "\(arguments)")
        }
        let status = try await cli.run(["--home", home, "-vv", "--log-level", "warning", "status"], withHome: false)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.hasPrefix("d (local, placeholder-files)"))
        // Words after the subcommand's name are left alone: `ls` gets `--home` as written.
        #expect(try await cli.run(["--home", home, "sync"], withHome: false).status == 0)
        let listed = try await cli.run(["--json", "ls", "d:/", "--home", home], withHome: false)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("\"name\":\"a.txt\""))
    }

    /// Global options with no command, or before `help`, ask for help.
    @Test func globalOptionsBeforeHelpOrNoCommandGiveHelp() async throws {
        let bare = try await cli.run(["--home", home], withHome: false)
        #expect(bare.status == 0, "\(bare.stderr)")
        #expect(bare.stdout.contains("OVERVIEW: Manage File Provider domains"), "\(bare.stdout)")
        let help = try await cli.run(["--home", home, "-v", "help", "status"], withHome: false)
        #expect(help.status == 0, "\(help.stderr)")
        #expect(help.stdout.contains("OVERVIEW: Show every domain's state"), "\(help.stdout)")
        let version = try await cli.run(["--home", home, "--version"], withHome: false)
        #expect(version.status == 0, "\(version.stderr)")
    }

    @Test func badGlobalOptionsAreUsageErrors() async throws {
        let level = try await cli.run(["--log-level", "loud", "status"])
        #expect(level.status == 2)
        #expect(level.stderr.contains("--log-level must be one of trace, debug"))
        // serve prints no data, so it has no --json, wherever it is written.
        let json = try await cli.run(["--json", "serve", "d"])
        #expect(json.status == 2)
        #expect(json.stderr.contains("--json"))
        let unknown = try await cli.run(["--colour", "status"])
        #expect(unknown.status == 2)
    }

    @Test func versionNamesTheCommitAndTheLibraries() async throws {
        let long = try await cli.run(["--version"], withHome: false)
        #expect(long.status == 0, "\(long.stderr)")
        let line = long.stdout.trimmingCharacters(in: .newlines)
        // The commit it was built from (this test runs in a git checkout).
        #expect(line.wholeMatch(of: /fileproviderctl [0-9a-f]{12}(-dirty)?/) != nil, "\(line)")
        let short = try await cli.run(["-V"], withHome: false)
        #expect(short.stdout == long.stdout)

        let version = try await cli.run(["version"])
        #expect(version.status == 0, "\(version.stderr)")
        let lines = version.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == line)
        for library in ["libssh2", "libcurl", "SQLite"] {
            #expect(lines.contains { $0.wholeMatch(of: /\S+ \d+\.\d+(\.\d+)?.*/) != nil && $0.hasPrefix(library + " ") }, "\(lines)")
        }
        let json = try await cli.json(["version"]) as? [String: Any]
        #expect(json?["commit"] as? String == String(line.dropFirst("fileproviderctl ".count)))
        let libraries = json?["libraries"] as? [String: String] ?? [:]
        #expect(Set(libraries.keys) == ["libssh2", "libcurl", "SQLite"])
        #expect(libraries["SQLite"]?.hasPrefix("3.") == true)
    }

    @Test func serveTakesTheLogLevelBeforeItsName() async throws {
        // -v: debug messages (the watcher's count of folders); the log level before `serve`.
        let verbose = try ServeProcess(
            cli, ["serve", "d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("verbose.log"), command: "-v")
        #expect(await waitUntil { verbose.output.contains("watching") && verbose.output.contains("serving d") }, "\(verbose.output)")
        #expect(await verbose.stop() == 0)

        // -q: errors only; the sync still happens (it brings b.txt down).
        try temp.write("src/b.txt", Data("b".utf8))
        let quiet = try ServeProcess(
            cli, ["serve", "d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("quiet.log"), command: "-q")
        let synced = try await waitUntil {
            let items = try await cli.json(["ls", "d:/"]) as? [[String: Any]]
            return items?.contains { $0["name"] as? String == "b.txt" } == true
        }
        #expect(synced, "\(quiet.output)")
        #expect(await quiet.stop() == 0)
        #expect(!quiet.output.contains("serving"), "\(quiet.output)")
        #expect(!quiet.output.contains("stopped"), "\(quiet.output)")
    }

    /// Intervals serve counts in nanoseconds: infinite, negative and absurdly long ones are usage
    /// errors that say the range, never a crash.
    @Test func serveRefusesIntervalsItCannotCount() async throws {
        for arguments in [
            ["--settle", "1e10"], ["--poll-interval", "1e300"], ["--eviction-interval", "inf"], ["--full-scan-interval=-1"],
            ["--domain-poll-interval", "d=inf"], ["--domain-poll-interval", "d=1e12"], ["--settle", "nan"],
        ] {
            let result = try await cli.run(["serve", "d"] + arguments)
            #expect(result.status == 64 || result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("31536000 seconds (a year)"), "\(arguments): \(result.stderr)")
        }
    }
}
