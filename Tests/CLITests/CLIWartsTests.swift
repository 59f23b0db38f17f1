import Foundation
import Testing

/// The command line's warts of issue #36: each is a command that did something surprising and
/// now does what a user expects, or says what to do.
@Suite struct CLIWartsTests {
    let temp: TemporaryFolder
    let cli: CLIRunner

    init() throws {
        temp = try TemporaryFolder()
        cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
    }

    var root: String { temp.url.appendingPathComponent("src").path }

    @Test func backendOptionsParseWhereverTheNameStands() async throws {
        let orders: [(String, [String])] = [
            ("first", ["domain", "add", "first", "--backend", "local", "--root", root]),
            ("before", ["domain", "add", "--backend", "local", "--root", root, "before"]),
            ("inline", ["domain", "add", "--root=\(root)", "--backend=local", "inline"]),
            (
                "between",
                ["domain", "add", "--backend", "local", "--root", root, "--replica", temp.url.appendingPathComponent("r").path, "between"]
            ),
        ]
        for (name, arguments) in orders {
            let added = try await cli.run(arguments)
            #expect(added.status == 0, "\(arguments): \(added.stderr)")
            #expect(added.stdout.contains("added domain '\(name)' (local)"))
        }
        let shown = try await cli.run(["domain", "show", "between"])
        #expect(shown.stdout.contains(temp.url.appendingPathComponent("r").path))
        // An option neither `domain add` nor the backend takes is named, wherever it stands.
        let unknown = try await cli.run(["domain", "add", "--backend", "local", "--rooot", root, "other"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("the local backend has no option --rooot; its options are --root"))
        let missing = try await cli.run(["domain", "add", "--backend", "local", "--root", root])
        #expect(missing.status == 2)
        #expect(
            missing.stderr == "error: the domain's name is missing: fileproviderctl domain add NAME --backend KIND [backend options]\n")
    }

    @Test func aMistypedCommandGetsADidYouMean() async throws {
        let sync = try await cli.run(["sycn"])
        #expect(sync.status == 2)
        #expect(sync.stderr == "error: unknown command 'sycn'; did you mean 'sync'?\n")
        let add = try await cli.run(["domain", "ad", "x", "--backend", "local"])
        #expect(add.status == 2)
        #expect(add.stderr == "error: unknown command 'domain ad'; did you mean 'domain add'?\n")
        let far = try await cli.run(["xyzzy"], withHome: false)
        #expect(far.status == 2)
        #expect(far.stderr.hasPrefix("error: unknown command 'xyzzy'; the commands are domain, sync, "))
        // Arguments of a command that takes no subcommand are left to it.
        #expect(try await cli.run(["help", "sync"], withHome: false).status == 0)
    }
}
