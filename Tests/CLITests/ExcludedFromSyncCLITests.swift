import Foundation
import ProviderTesting
import Testing

/// A local item the store cannot take is excluded from sync: `sync` says so once, `status`,
/// `pending` and `why` show it until it changes.
@Suite struct ExcludedFromSyncCLITests {
    @Test func aSymlinkIsToldOnceAndListedByStatusPendingAndWhy() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        let cli = CLIRunner(in: temp)
        try await cli.addLocalDomain("p", root: temp.url.appendingPathComponent("store"), sync: true)
        let replica = cli.home.appendingPathComponent("domains/p")
        try FileManager.default.createSymbolicLink(atPath: replica.appendingPathComponent("link").path, withDestinationPath: "a.txt")

        let first = try await cli.run(["sync", "p"])
        // Told once, as a change not sent: the sync succeeded in part (exit 3).
        #expect(first.status == 3 && first.stderr.contains("p: 1 change not sent"), "\(first.stderr)")
        let told = (first.stdout + first.stderr).components(separatedBy: "excluded from sync").count - 1
        #expect(told == 1, "\(first.stdout)\(first.stderr)")
        let second = try await cli.run(["sync", "p"])
        #expect(second.status == 0 && !(second.stdout + second.stderr).contains("excluded"), "\(second.stdout)\(second.stderr)")
        #expect(!FileManager.default.fileExists(atPath: temp.url.appendingPathComponent("store/link").path), "never sent")

        let status = try await cli.run(["status", "p"])
        #expect(status.stdout.contains("1 item excluded from sync") && status.stdout.contains("/link: "), "\(status.stdout)")
        let json = try await cli.run(["status", "p", "--json"])
        let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        let excluded = rows?.first?["excluded"] as? [[String: Any]]
        #expect(excluded?.map { $0["path"] as? String } == ["/link"] && excluded?.first?["kind"] as? String == "symlink", "\(json.stdout)")

        let pending = try await cli.run(["pending", "p"])
        #expect(pending.stdout.contains("p:/link") && pending.stdout.contains("excluded from sync"), "\(pending.stdout)")
        let why = try await cli.run(["why", "p:/link", "--json"])
        let explanation = try JSONSerialization.jsonObject(with: Data(why.stdout.utf8)) as? [String: Any]
        #expect(explanation?["localChange"] as? String == "excluded" && explanation?["kind"] as? String == "symlink", "\(why.stdout)")

        // Gone from the replica: nothing is listed any more.
        try FileManager.default.removeItem(at: replica.appendingPathComponent("link"))
        #expect(try await cli.run(["sync", "p"]).status == 0)
        #expect(!(try await cli.run(["status", "p"])).stdout.contains("excluded"))
        #expect(try await cli.run(["pending", "p"]).stdout == "nothing pending\n")
    }
}
