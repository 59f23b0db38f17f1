import Foundation
import ProviderStore
import Testing

/// `domain remove` never deletes what the store does not have without being told to.
@Suite struct DomainRemoveTests {
    /// A domain `r` with a downloaded file edited, a new file, a moved file, a deleted file, a
    /// file made inside a folder that was never populated, and a failed upload in the journal.
    func prepared(_ temp: TemporaryFolder, _ cli: CLIRunner) async throws -> URL {
        try temp.write("src/edited.txt", Data("stored".utf8))
        try temp.write("src/moved.txt", Data("m".utf8))
        try temp.write("src/deleted.txt", Data("d".utf8))
        try temp.write("src/failed.txt", Data("f".utf8))
        for index in 0..<3 { try temp.write("src/far/item\(index).txt", Data("x".utf8)) }
        try await cli.addLocalDomain("r", root: temp.url.appendingPathComponent("src"))
        // No entry for new folders: "far" stays dataless (empty in the replica).
        #expect(try await cli.run(["sync", "r", "--populate-limit", "0"]).status == 0)
        #expect(try await cli.run(["materialize", "r:/edited.txt"]).status == 0)
        let replica = cli.home.appendingPathComponent("domains/r")
        try Data("edited here".utf8).write(to: replica.appendingPathComponent("edited.txt"))
        try Data("new here".utf8).write(to: replica.appendingPathComponent("new.txt"))
        try FileManager.default.moveItem(
            at: replica.appendingPathComponent("moved.txt.placeholder"), to: replica.appendingPathComponent("renamed.txt.placeholder"))
        try FileManager.default.removeItem(at: replica.appendingPathComponent("deleted.txt.placeholder"))
        try Data("inside".utf8).write(to: replica.appendingPathComponent("far/made here.txt"))
        // An upload of the edit that the store refused earlier, in the journal, and a stale entry of
        // failed.txt, which has no local change any more.
        let database = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        let domain = try #require(try database.domain(named: "r"))
        for (path, error) in [("edited.txt", "the store refused it"), ("failed.txt", "an older failure")] {
            let item = try #require(try database.item(domainID: domain.id!, path: path))
            var entry = JournalEntry(
                domainID: domain.id!, templateIdentifier: "modify:\(item.identifier.rawValue)", operation: "modify",
                payload: "{\"path\":\"\(path)\"}")
            entry.state = .failed
            entry.attempts = 2
            entry.lastError = error
            _ = try database.journal(entry)
        }
        return replica
    }

    @Test func refusesToDeleteChangesTheStoreDoesNotHaveAndListsThem() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let replica = try await prepared(temp, cli)

        let refused = try await cli.run(["domain", "remove", "r"])
        #expect(refused.status == 1)
        #expect(refused.stdout.isEmpty)
        let lines = refused.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == "error: domain 'r' was not removed: its replica has 6 changes the store does not have:", "\(refused.stderr)")
        let listed = Dictionary(
            uniqueKeysWithValues: lines.dropFirst().dropLast().compactMap { line -> (String, String)? in
                let parts = line.trimmingCharacters(in: .whitespaces).components(separatedBy: "  ").filter { !$0.isEmpty }
                guard parts.count >= 2 else { return nil }
                return (parts[0], parts[1...].joined(separator: "  ").trimmingCharacters(in: .whitespaces))
            })
        #expect(
            listed.keys.sorted() == ["/deleted.txt", "/edited.txt", "/failed.txt", "/far/made here.txt", "/new.txt", "/renamed.txt"],
            "\(refused.stderr)")
        #expect(listed["/edited.txt"]?.hasPrefix("edited: changed locally since it was downloaded") == true)
        #expect(listed["/edited.txt"]?.contains("modify refused by the store") == true)
        #expect(listed["/edited.txt"]?.contains("last error: the store refused it") == true)
        #expect(listed["/new.txt"]?.hasPrefix("created: new in the replica") == true)
        #expect(listed["/renamed.txt"]?.hasPrefix("moved: moved here from /moved.txt") == true)
        #expect(listed["/deleted.txt"]?.hasPrefix("deleted: ") == true)
        #expect(
            listed["/far/made here.txt"]?.hasPrefix("created: new in the replica inside /far, a folder that was not populated yet") == true)
        #expect(listed["/failed.txt"]?.hasPrefix("unfinished: modify refused by the store") == true)
        #expect(listed["/failed.txt"]?.contains("last error: an older failure") == true)
        #expect(lines.last?.contains("--force") == true)
        // Nothing was touched.
        #expect(try Data(contentsOf: replica.appendingPathComponent("edited.txt")) == Data("edited here".utf8))
        #expect(try Data(contentsOf: replica.appendingPathComponent("new.txt")) == Data("new here".utf8))
        let domains = try #require(try await cli.json(["domain", "list"]) as? [[String: Any]])
        #expect(domains.compactMap { $0["name"] as? String } == ["r"])

        // --json carries the list.
        let json = try await cli.run(["domain", "remove", "r", "--json"])
        #expect(json.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["removed"] as? Bool == false)
        let unsent = try #require(object["unsent"] as? [[String: Any]])
        let kinds = Dictionary(
            uniqueKeysWithValues: unsent.compactMap { row in (row["path"] as? String).map { ($0, row["kind"] as? String ?? "") } })
        #expect(
            kinds == [
                "/deleted.txt": "deleted", "/edited.txt": "edited", "/failed.txt": "unfinished", "/far/made here.txt": "created",
                "/new.txt": "created", "/renamed.txt": "moved",
            ])
        let failed = try #require(unsent.first { $0["path"] as? String == "/edited.txt" })
        #expect((failed["operation"] as? [String: Any])?["state"] as? String == "failed")
        #expect((failed["operation"] as? [String: Any])?["lastError"] as? String == "the store refused it")
        #expect(unsent.first { $0["path"] as? String == "/renamed.txt" }?["from"] as? String == "/moved.txt")

        // After a sync nothing is left to lose (the stale journal entry has nothing in the
        // replica behind it): removed.
        #expect(try await cli.run(["sync", "r"]).status == 0)
        let store = temp.url.appendingPathComponent("src")
        #expect(try Data(contentsOf: store.appendingPathComponent("far/made here.txt")) == Data("inside".utf8))
        let removed = try await cli.run(["domain", "remove", "r"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout == "removed domain 'r'\n")
        #expect(!FileManager.default.fileExists(atPath: replica.path))
    }

    @Test func keepReplicaKeepsEverythingLocalAndForceDeletes() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let replica = try await prepared(temp, cli)
        // A file of the user's that looks like a placeholder but is not one of this domain's.
        try Data("mine".utf8).write(to: replica.appendingPathComponent("failed.txt.placeholder"))

        let kept = try await cli.run(["domain", "remove", "r", "--keep-replica"])
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(kept.stdout == "removed domain 'r'; kept \(replica.path)\n")
        #expect(kept.stderr == "warning: 5 local changes were never sent to the store; what is in \(replica.path) stays there\n")
        #expect(try Data(contentsOf: replica.appendingPathComponent("edited.txt")) == Data("edited here".utf8))
        #expect(try Data(contentsOf: replica.appendingPathComponent("new.txt")) == Data("new here".utf8))
        #expect(try Data(contentsOf: replica.appendingPathComponent("far/made here.txt")) == Data("inside".utf8))
        #expect(try Data(contentsOf: replica.appendingPathComponent("failed.txt.placeholder")) == Data("mine".utf8))
        // The domain's own placeholders are gone (the moved one too); the user's file stays.
        let left = try FileManager.default.subpathsOfDirectory(atPath: replica.path).filter { $0.hasSuffix(".placeholder") }
        #expect(left == ["failed.txt.placeholder"])

        // --force deletes the replica with what the store does not have.
        let temp2 = try TemporaryFolder()
        let cli2 = CLIRunner(in: temp2)
        let replica2 = try await prepared(temp2, cli2)
        let forced = try await cli2.run(["domain", "remove", "r", "--force"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(!FileManager.default.fileExists(atPath: replica2.path))
    }
}
