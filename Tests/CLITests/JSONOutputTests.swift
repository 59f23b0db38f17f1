import Foundation
import Testing

/// Every `--json` output writes its dates one way (RFC 3339 with fractional seconds), gives a
/// MIME type beside each content type, and uses only keys that Docs/CLI.md's "JSON output"
/// section lists.
@Suite struct JSONOutputTests {
    static let dateKeys: Set<String> = ["modified", "createdAt", "lastSyncAt", "nextRetryAt", "at", "date", "since"]
    /// RFC 3339 in UTC with six fractional digits.
    static func isRFC3339(_ text: String) -> Bool {
        text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z/) != nil
    }

    /// The keys of every object in `value`, with their values; the insides of `options` and
    /// `libraries` (maps keyed by option and library names) left out.
    static func keys(_ value: Any, into found: inout [(String, Any)]) {
        if let object = value as? [String: Any] {
            for (key, inner) in object {
                found.append((key, inner))
                if key != "options" && key != "libraries" { keys(inner, into: &found) }
            }
        } else if let array = value as? [Any] {
            for inner in array { keys(inner, into: &found) }
        }
    }

    /// The "JSON output" section of Docs/CLI.md.
    static func documentedSection() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Docs/CLI.md"), encoding: .utf8)
        guard let start = text.range(of: "\n## JSON output\n") else { return "" }
        let rest = text[start.upperBound...]
        let end = rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex
        return String(rest[..<end])
    }

    @Test func datesAreRFC3339KeysAreDocumentedAndMIMETypesAreGiven() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let src = temp.url.appendingPathComponent("src")
        try temp.write("src/a.jpg", Data("jpeg".utf8))
        try temp.write("src/sub/b.txt", Data("text".utf8))
        try temp.write("src/c.unknownext", Data("?".utf8))
        try await cli.addLocalDomain("d", root: src, options: ["--cache-budget", "1"])
        #expect(try await cli.run(["sync"]).status == 0)
        #expect(try await cli.run(["materialize", "-R", "d:/"]).status == 0)
        // A conflict (for `conflicts` and `why`), an automatic eviction, a pending change.
        let replica = cli.home.appendingPathComponent("domains/d")
        try Data("edited here".utf8).write(to: replica.appendingPathComponent("a.jpg"))
        try Data("edited in the store".utf8).write(to: src.appendingPathComponent("a.jpg"))
        _ = try await cli.run(["sync"])
        _ = try await cli.run(["evict", "--to-budget"])
        try Data("new".utf8).write(to: replica.appendingPathComponent("new.txt"))

        let commands: [[String]] = [
            ["ls", "-R", "d:/"], ["status"], ["domain", "list"], ["domain", "show", "d"], ["why", "d:/a.jpg"], ["conflicts"],
            ["pending"], ["cache"], ["version"], ["signal", "d"], ["evict", "d:/sub/b.txt"], ["materialize", "d:/sub/b.txt"],
            ["policy", "d:/sub"], ["policy", "d:/sub", "eager"], ["evict", "d:/sub/b.txt"], ["evict", "--to-budget", "d"],
            ["domain", "set", "d", "--cache-budget", "none"], ["domain", "disconnect", "d"], ["domain", "connect", "d"], ["sync", "d"],
        ]
        let documented = try Self.documentedSection()
        #expect(documented.contains("RFC 3339"))
        var dates = 0
        for command in commands {
            let result = try await cli.run(command + ["--json"])
            // Evicting a pinned file fails (exit 1) and says so in its JSON.
            let pinned = command == ["evict", "d:/sub/b.txt"] && result.stdout.contains("nonEvictable")
            #expect(result.status == (pinned ? 1 : 0), "\(command): \(result.stderr)")
            let value = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
            var found: [(String, Any)] = []
            Self.keys(value, into: &found)
            for (key, inner) in found {
                #expect(documented.contains("`\(key)`"), "\(command): the key \(key) is not listed in CLI.md's JSON output section")
                if Self.dateKeys.contains(key) {
                    dates += 1
                    let text = inner as? String ?? "\(inner)"
                    #expect(Self.isRFC3339(text), "\(command): \(key) is \(text)")
                }
            }
        }
        #expect(dates > 10)

        let items = try await cli.json(["ls", "-R", "d:/"]) as? [[String: Any]] ?? []
        let mime = Dictionary(items.map { ($0["name"] as? String ?? "", $0["mimeType"] as? String ?? "") }, uniquingKeysWith: { a, _ in a })
        #expect(mime["a.jpg"] == "image/jpeg")
        #expect(mime["b.txt"] == "text/plain")
        #expect(mime["sub"] == "inode/directory")
        #expect(mime["c.unknownext"] == "application/octet-stream")
        #expect(items.first { $0["name"] as? String == "a.jpg" }?["contentType"] as? String == "public.jpeg")
    }
}
