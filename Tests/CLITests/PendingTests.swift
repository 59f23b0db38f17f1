import Foundation
import ProviderTesting
import Testing

/// `pending` lists what the next sync would send, not only the journal: five local changes
/// with an empty journal are five lines, never "nothing pending".
@Suite struct PendingTests {
    @Test func pendingListsWhatTheNextSyncWouldSend() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/edit.txt", Data("one".utf8))
        try temp.write("store/gone.txt", Data("two".utf8))
        try temp.write("store/move.txt", Data("three".utf8))
        try temp.write("store/log.txt", Data("line1\n".utf8))
        let cli = CLIRunner(in: temp)
        try await cli.addLocalDomain("p", root: temp.url.appendingPathComponent("store"), sync: true)
        #expect(try await cli.run(["materialize", "p:/edit.txt", "p:/move.txt"]).status == 0)
        let replica = cli.home.appendingPathComponent("domains/p")
        try Data("edited".utf8).write(to: replica.appendingPathComponent("edit.txt"))
        try Data("new".utf8).write(to: replica.appendingPathComponent("new.txt"))
        try FileManager.default.moveItem(at: replica.appendingPathComponent("move.txt"), to: replica.appendingPathComponent("moved.txt"))
        try FileManager.default.removeItem(at: replica.appendingPathComponent("gone.txt.placeholder"))
        try Data("line2\n".utf8).write(to: replica.appendingPathComponent("log.txt"))

        let text = try await cli.run(["pending", "p"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(!text.stdout.contains("nothing pending"))
        let json = try await cli.run(["pending", "--json"])
        let decoded = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let rows = decoded?["pending"] as? [[String: Any]] ?? []
        let kinds = Dictionary(
            uniqueKeysWithValues: rows.compactMap { row in (row["path"] as? String).map { ($0, row["kind"] as? String ?? "") } })
        #expect(
            kinds == [
                "/edit.txt": "edited", "/new.txt": "created", "/moved.txt": "moved", "/gone.txt": "deleted",
                "/log.txt": "overwrotePlaceholder",
            ], "\(json.stdout)")
        #expect(rows.allSatisfy { $0["domain"] as? String == "p" })
        for path in kinds.keys { #expect(text.stdout.contains("p:\(path)"), "\(text.stdout)") }

        // Nothing was sent or changed by asking.
        #expect(try String(contentsOf: temp.url.appendingPathComponent("store/edit.txt"), encoding: .utf8) == "one")
        #expect(FileManager.default.fileExists(atPath: temp.url.appendingPathComponent("store/gone.txt").path))
        #expect(try await cli.run(["sync", "p"]).status == 0)
        #expect(try await cli.run(["pending", "p"]).stdout == "nothing pending\n")
    }

    @Test func pendingOfAMissingReplicaSaysSoAndListsNoDeletions() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        let cli = CLIRunner(in: temp)
        try await cli.addLocalDomain("p", root: temp.url.appendingPathComponent("store"), sync: true)
        try FileManager.default.removeItem(at: cli.home.appendingPathComponent("domains/p"))
        let result = try await cli.run(["pending", "p"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("is missing"), "\(result.stderr)")
        #expect(!result.stdout.contains("deleted"))
        let sync = try await cli.run(["sync", "p"])
        #expect(sync.status == 1)
        #expect(FileManager.default.fileExists(atPath: temp.url.appendingPathComponent("store/a.txt").path), "nothing deleted in the store")
    }
}
