import Foundation
import Testing

/// Names with escape sequences and line breaks never reach the terminal as they are: `ls`,
/// `why`, `conflicts`, errors, warnings and serve's logs quote them as GNU `ls` does; JSON keeps
/// them exactly.
@Suite("CLI safe text")
struct SafeTextTests {
    static let red = "esc\u{1B}[31mRED.txt"
    static let quotedRed = #"'esc'$'\033''[31mRED.txt'"#
    static let broken = "line\nbreak.txt"

    let temp: TemporaryFolder
    let cli: CLIRunner
    var src: URL { temp.url.appendingPathComponent("src") }
    var replica: URL { cli.home.appendingPathComponent("domains/d") }

    init() async throws {
        temp = try TemporaryFolder()
        cli = CLIRunner(in: temp)
        try temp.write("src/\(Self.red)", Data("red".utf8))
        try temp.write("src/\(Self.broken)", Data("broken".utf8))
        try await cli.addLocalDomain("d", root: src)
        let synced = try await cli.run(["sync"])
        #expect(synced.status == 0, "\(synced.stderr)")
    }

    /// No escape character, no carriage return.
    func expectClean(_ text: String, _ what: String) {
        #expect(!text.contains("\u{1B}"), "\(what) wrote an escape character: \(text.debugDescription)")
        #expect(!text.contains("\r"), "\(what) wrote a carriage return: \(text.debugDescription)")
    }

    @Test func lsAndWhyQuoteNamesAndJSONKeepsThem() async throws {
        let listed = try await cli.run(["ls", "d:/"])
        #expect(listed.status == 0, "\(listed.stderr)")
        expectClean(listed.stdout, "ls")
        #expect(listed.stdout.contains("  " + Self.quotedRed + "\n"), "\(listed.stdout)")
        #expect(listed.stdout.contains(#"  'line'$'\n''break.txt'"# + "\n"), "\(listed.stdout)")
        #expect(listed.stdout.split(separator: "\n").count == 2, "a name's line break made a line: \(listed.stdout)")

        let json = try await cli.json(["ls", "d:/"]) as? [[String: Any]] ?? []
        #expect(Set(json.compactMap { $0["name"] as? String }) == [Self.red, Self.broken])

        let why = try await cli.run(["why", "d:/\(Self.red)"])
        #expect(why.status == 0, "\(why.stderr)")
        expectClean(why.stdout, "why")
        #expect(why.stdout.hasPrefix(#"'d:/esc'$'\033''[31mRED.txt'"# + "\n"), "\(why.stdout)")
        let whyJSON = try await cli.json(["why", "d:/\(Self.red)"]) as? [String: Any]
        #expect(whyJSON?["path"] as? String == "/" + Self.red)

        let missing = try await cli.run(["why", "d:/nope\u{1B}[2J"])
        #expect(missing.status != 0)
        expectClean(missing.stderr, "an error")
        #expect(missing.stderr.contains(#"'d:/nope'$'\033''[2J'"#), "\(missing.stderr)")
    }

    @Test func conflictsWarningsAndServeLogsQuoteNames() async throws {
        // Edited on both sides: a conflict, reported as a warning and listed by `conflicts`.
        #expect(try await cli.run(["materialize", "d:/\(Self.red)"]).status == 0)
        try Data("edited here".utf8).write(to: replica.appendingPathComponent(Self.red))
        try Data("edited in the store, longer".utf8).write(to: src.appendingPathComponent(Self.red))
        let synced = try await cli.run(["sync"])
        expectClean(synced.stdout + synced.stderr, "sync")
        #expect(synced.stderr.contains(#"$'\033'"#), "\(synced.stderr)")

        let conflicts = try await cli.run(["conflicts"])
        #expect(conflicts.status == 0, "\(conflicts.stderr)")
        expectClean(conflicts.stdout, "conflicts")
        #expect(conflicts.stdout.contains(#"'d:/esc'$'\033''[31mRED"#), "\(conflicts.stdout)")
        let listed = try await cli.json(["conflicts"]) as? [[String: Any]] ?? []
        #expect(listed.contains { $0["path"] as? String == "/" + Self.red }, "\(listed)")

        // The same name new on both sides while serve runs: its log names it, quoted.
        let twice = "dup\u{1B}[1mBOLD.txt"
        try temp.write("src/\(twice)", Data("store".utf8))
        try Data("here".utf8).write(to: replica.appendingPathComponent(twice))
        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600", "--settle", "0.1"], log: temp.url.appendingPathComponent("serve.log"))
        #expect(await waitUntil { serve.output.contains(#"'d:/dup'$'\033''[1mBOLD"#) }, "\(serve.output)")
        #expect(await serve.stop() == 0)
        expectClean(serve.output, "serve's log")
    }
}
