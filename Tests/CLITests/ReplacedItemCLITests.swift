import Foundation
import Testing

/// A store with identifiers of its own, through the real binary and an external program
/// (`Tests/Fixtures/ExternalBackends/fileprovider-backend-fileids`: pyfolder with ids kept in
/// an extended attribute, as Nextcloud's `oc:fileid`): a file someone deletes and writes again
/// under the same name is a new item, and three syncs later it is still in the store and in
/// the replica, with nothing sent back.
@Suite struct ReplacedItemCLITests {
    @Test func aFileReplacedInTheStoreKeepsItsPlace() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = ExternalBackendCLITests.environment(temp)
        let store = temp.url.appendingPathComponent("store")
        try temp.write("store/a.txt", Data("first".utf8))
        try temp.write("store/docs/b.txt", Data("b".utf8))
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "ids", "--backend", "fileids", "--root", store.path], environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let first = try await cli.run(["sync", "ids"], environment: environment)
        #expect(first.status == 0, "\(first.stderr)")
        let materialized = try await cli.run(["materialize", "ids:/docs/b.txt"], environment: environment)
        #expect(materialized.status == 0, "\(materialized.stderr)")

        // Another client replaces both: deleted, then written again (new files, new ids).
        try FileManager.default.removeItem(at: store.appendingPathComponent("a.txt"))
        try Data("second, longer".utf8).write(to: store.appendingPathComponent("a.txt"))
        try FileManager.default.removeItem(at: store.appendingPathComponent("docs/b.txt"))
        try Data("b again".utf8).write(to: store.appendingPathComponent("docs/b.txt"))

        for round in 1...3 {
            let synced = try await cli.run(["sync", "ids", "--json"], environment: environment)
            #expect(synced.status == 0, "round \(round): \(synced.stderr)")
            let output = try #require(try JSONSerialization.jsonObject(with: Data(synced.stdout.utf8)) as? [String: Any])
            let report = try #require((output["reports"] as? [[String: Any]])?.first, "\(synced.stdout)")
            #expect(report["deleted"] as? Int == 0 && report["uploaded"] as? Int == 0, "round \(round): \(report)")
            #expect((report["notices"] as? [String])?.isEmpty == true, "round \(round): \(report)")
        }
        #expect(try Data(contentsOf: store.appendingPathComponent("a.txt")) == Data("second, longer".utf8))
        #expect(try Data(contentsOf: store.appendingPathComponent("docs/b.txt")) == Data("b again".utf8))
        let replica = cli.home.appendingPathComponent("domains/ids")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt.placeholder").path))
        #expect(try Data(contentsOf: replica.appendingPathComponent("docs/b.txt")) == Data("b again".utf8), "downloaded again")
        let again = try await cli.run(["materialize", "ids:/a.txt"], environment: environment)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try Data(contentsOf: replica.appendingPathComponent("a.txt")) == Data("second, longer".utf8))
    }
}
