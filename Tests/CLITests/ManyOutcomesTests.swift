import Foundation
import Testing

/// `materialize` and `evict` count their items' outcomes as they come instead of holding one per
/// item (a million files): `--json` writes the rows as they come, the same array as before, and
/// the text output names the first 1,000 failures and counts the rest.
@Suite struct ManyOutcomesTests {
    @Test func jsonRowsAreOneArrayInOrderAcrossDomainsAndPaths() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        for path in ["one/a.txt", "one/sub/b.txt", "one/sub/c.txt", "two/d.txt"] { try temp.write(path, Data(path.utf8)) }
        for name in ["one", "two"] {
            try await cli.addLocalDomain(name, root: temp.url.appendingPathComponent(name))
        }
        #expect(try await cli.run(["sync"]).status == 0)
        let result = try await cli.run(["materialize", "-R", "one:/sub", "one:/missing", "two:/d.txt", "one:/a.txt", "--json"])
        #expect(result.status == 1, "one item failed")
        #expect(result.stdout.hasPrefix("[{") && result.stdout.hasSuffix("}]\n") && !result.stdout.contains(",,"), "\(result.stdout)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        #expect(
            rows.map { $0["path"] as? String ?? "" } == ["one:/sub/b.txt", "one:/sub/c.txt", "one:/missing", "one:/a.txt", "two:/d.txt"])
        #expect(rows.map { $0["ok"] as? Bool ?? false } == [true, true, false, true, true])
        #expect(rows[2]["code"] as? String == "noSuchItem")
        #expect(rows.enumerated().allSatisfy { $0.offset == 2 || $0.element["error"] == nil })

        let folder = try await cli.run(["evict", "one:/sub", "--json"])
        #expect(folder.status == 0, "\(folder.stderr)")
        let folderRows = try #require(try JSONSerialization.jsonObject(with: Data(folder.stdout.utf8)) as? [[String: Any]])
        #expect(folderRows.map { $0["path"] as? String ?? "" } == ["one:/sub/b.txt", "one:/sub/c.txt"])
        let none = try await cli.run(["evict", "-R", "two:/", "--json"])
        #expect(none.status == 0, "\(none.stderr)")
        let evicted = try #require(try JSONSerialization.jsonObject(with: Data(none.stdout.utf8)) as? [[String: Any]])
        #expect(evicted.map { $0["path"] as? String ?? "" } == ["two:/d.txt"])
        #expect(try await cli.run(["evict", "-R", "two:/", "--json"]).stdout == "[]\n", "nothing left to evict")
    }

    @Test func theFirstThousandFailuresAreNamedAndTheRestCounted() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))
        #expect(try await cli.run(["sync"]).status == 0)
        let missing = (0..<1_002).map { "d:/missing-\($0)" }
        let result = try await cli.run(["materialize"] + missing + ["d:/a.txt"])
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1_001, "\(lines.suffix(2))")
        #expect(lines.first?.hasPrefix("error: no item at d:/missing-0;") == true)
        #expect(lines[999].hasPrefix("error: no item at d:/missing-999;"))
        #expect(lines.last == "error: 2 more items failed (the first 1000 are shown)")
        #expect(result.stdout == "materialized 1 item, 1002 failed\n")
        let json = try await cli.run(["materialize"] + missing + ["d:/a.txt", "--json"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        // Every item (a.txt, downloaded by the run before, is skipped: no outcome).
        #expect(rows.count == 1_002 && rows.allSatisfy { $0["code"] as? String == "noSuchItem" })
    }
}
