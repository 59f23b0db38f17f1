import Foundation
import Testing

/// What `evict` and the other item commands print for a failed item: one line naming the item
/// once, and advice that works.
@Suite struct OutcomeMessageTests {
    @Test func evictOfAFilePinnedThroughItsFolderNamesTheFolderOnce() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/sub/f", Data("f".utf8))
        try temp.write("src/top.txt", Data("t".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), sync: true)
        #expect(try await cli.run(["pin", "d:/sub"]).status == 0)

        let refused = try await cli.run(["evict", "d:/sub/f"])
        let message = "d:/sub/f is pinned (policy eager through d:/sub); 'fileproviderctl policy d:/sub lazy' makes it evictable"
        #expect(refused.status == 1)
        #expect(refused.stderr == "error: \(message)\n")
        #expect(refused.stdout == "evicted 0 items, 1 failed\n")
        let json = try await cli.run(["evict", "d:/sub/f", "--json"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(rows.first?["code"] as? String == "nonEvictable")
        #expect(rows.first?["error"] as? String == message)

        // The folder itself, and everything below it with -R.
        let folder = try await cli.run(["evict", "d:/sub"])
        #expect(folder.stderr == "error: d:/sub is pinned (policy eager); 'fileproviderctl policy d:/sub lazy' makes it evictable\n")
        let below = try await cli.run(["evict", "-R", "d:/"])
        #expect(below.stderr == "error: \(message)\n")

        // The advice works.
        #expect(try await cli.run(["policy", "d:/sub", "lazy"]).status == 0)
        let evicted = try await cli.run(["evict", "d:/sub/f"])
        #expect(evicted.status == 0, "\(evicted.stderr)")
        #expect(FileManager.default.fileExists(atPath: cli.home.appendingPathComponent("domains/d/sub/f.placeholder").path))

        // A pin on the root is named as well.
        #expect(try await cli.run(["pin", "d:/"]).status == 0)
        let root = try await cli.run(["evict", "d:/top.txt"])
        #expect(
            root.stderr == "error: d:/top.txt is pinned (policy eager through d:/); 'fileproviderctl policy d:/ lazy' makes it evictable\n")
    }

    @Test func everyFailedItemIsNamedOnce() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
        try FileManager.default.createSymbolicLink(atPath: temp.url.appendingPathComponent("src/link").path, withDestinationPath: "a.txt")
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), sync: true)
        #expect(try await cli.run(["materialize", "d:/a.txt"]).status == 0)
        try Data("edited".utf8).write(to: cli.home.appendingPathComponent("domains/d/a.txt"))

        // Messages that name the item are printed as they are...
        let edited = try await cli.run(["evict", "d:/a.txt"])
        #expect(edited.stderr == "error: d:/a.txt has local changes that are not uploaded; nothing was evicted\n")
        let unknown = try await cli.run(["materialize", "d:/nope"])
        #expect(unknown.stderr == "error: no item at d:/nope; run 'fileproviderctl sync d' to refresh\n")
        // ...one that does not is prefixed with the item.
        let link = try await cli.run(["materialize", "d:/link"])
        #expect(link.stderr == "error: d:/link: a symlink to a.txt; symlinks stay placeholders and are never followed\n")
    }
}
