import Foundation
import Testing

/// Runs the real binary: two local domains side by side through their whole life.
@Suite struct EndToEndTests {
    @Test func twoLocalDomainsSideBySide() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        var random = SystemRandomNumberGenerator()
        let binary = Data((0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) })
        try temp.write("photos/2024/beach.jpg", binary)
        try temp.write("photos/2024/nested/deep.png", Data("png".utf8))
        try temp.write("photos/readme.txt", Data("hello photos\n".utf8))
        try temp.write("docs/notes.md", Data("# notes\n".utf8))
        try temp.write("docs/empty.txt", Data())
        try temp.write("docs/ünïcødé name.txt", Data("x".utf8))

        for name in ["photos", "docs"] {
            try await cli.addLocalDomain(name, root: temp.url.appendingPathComponent(name))
        }
        let sync = try await cli.run(["sync"])
        #expect(sync.status == 0, "\(sync.stderr)")

        let photos = try #require(try await cli.json(["ls", "photos:/", "-R"]) as? [[String: Any]])
        #expect(
            Set(photos.compactMap { $0["path"] as? String }) == [
                "/2024", "/2024/beach.jpg", "/2024/nested", "/2024/nested/deep.png", "/readme.txt",
            ])
        for item in photos where item["kind"] as? String == "file" {
            #expect(item["state"] as? String == "placeholder")
        }
        let docs = try #require(try await cli.json(["ls", "docs:/"]) as? [[String: Any]])
        #expect(docs.count == 3)
        #expect(docs.allSatisfy { $0["state"] as? String == "placeholder" })

        let replica = cli.home.appendingPathComponent("domains/photos")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("2024/beach.jpg.placeholder").path))
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("2024/beach.jpg").path))

        let materialized = try await cli.run(["materialize", "photos:/2024/beach.jpg"])
        #expect(materialized.status == 0, "\(materialized.stderr)")
        #expect(try Data(contentsOf: replica.appendingPathComponent("2024/beach.jpg")) == binary)
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("2024/beach.jpg.placeholder").path))
        let afterMaterialize = try #require(try await cli.json(["ls", "photos:/2024/beach.jpg"]) as? [[String: Any]])
        #expect(afterMaterialize.first?["state"] as? String == "materialized")

        // A path inside the replica works as well as DOMAIN:/path.
        let evicted = try await cli.run(["evict", replica.appendingPathComponent("2024/beach.jpg").path])
        #expect(evicted.status == 0, "\(evicted.stderr)")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("2024/beach.jpg").path))
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("2024/beach.jpg.placeholder").path))
        let afterEvict = try #require(try await cli.json(["ls", "photos:/2024/beach.jpg"]) as? [[String: Any]])
        #expect(afterEvict.first?["state"] as? String == "placeholder")

        let list = try #require(try await cli.json(["domain", "list"]) as? [[String: Any]])
        #expect(list.compactMap { $0["name"] as? String } == ["docs", "photos"])

        let removed = try await cli.run(["domain", "remove", "photos"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: replica.path))
        let remaining = try #require(try await cli.json(["domain", "list"]) as? [[String: Any]])
        #expect(remaining.compactMap { $0["name"] as? String } == ["docs"])
        // The source is never touched.
        #expect(try Data(contentsOf: temp.url.appendingPathComponent("photos/2024/beach.jpg")) == binary)
    }

    @Test func materializeRecursivelyAndPin() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        for index in 0..<50 { try temp.write("src/f\(index / 10)/file\(index).txt", Data("content \(index)".utf8)) }
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))
        try await cli.run(["sync", "d"])
        let result = try await cli.run(["materialize", "-R", "d:/"])
        #expect(result.status == 0, "\(result.stderr)")
        let items = try #require(try await cli.json(["ls", "-R", "d:/"]) as? [[String: Any]])
        #expect(items.filter { $0["state"] as? String == "materialized" }.count == 50)
        let replica = cli.home.appendingPathComponent("domains/d")
        #expect(try String(contentsOf: replica.appendingPathComponent("f3/file37.txt"), encoding: .utf8) == "content 37")

        // Pin a folder; a file added later to the store under it comes down on the next sync.
        try await cli.run(["evict", "-R", "d:/f1"])
        #expect(try await cli.run(["pin", "d:/f1"]).status == 0)
        try temp.write("src/f1/late.txt", Data("late".utf8))
        #expect(try await cli.run(["sync", "d"]).status == 0)
        #expect(try String(contentsOf: replica.appendingPathComponent("f1/late.txt"), encoding: .utf8) == "late")
        let refused = try await cli.run(["evict", "d:/f1/late.txt"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("pinned"))
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("f1/late.txt").path))
    }
}

/// Dataless folders through the CLI: a sync with no population budget, then `populate`.
@Suite struct DatalessCLITests {
    @Test func populateShowsTheItemsOfADatalessFolder() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        for index in 0..<12 { try temp.write("src/albums/a\(index % 3)/photo\(index).jpg", Data("photo \(index)".utf8)) }
        try temp.write("src/top.txt", Data("top".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))
        let sync = try await cli.run(["sync", "d", "--populate-limit", "0"])
        #expect(sync.status == 0, "\(sync.stderr)")
        let replica = cli.home.appendingPathComponent("domains/d")
        #expect(try FileManager.default.contentsOfDirectory(atPath: replica.appendingPathComponent("albums").path).isEmpty)

        // The database lists everything, and says which folders are dataless.
        let items = try #require(try await cli.json(["ls", "-R", "d:/"]) as? [[String: Any]])
        #expect(items.count == 17)  // albums, its 3 folders, 12 photos and top.txt
        #expect(items.first { $0["path"] as? String == "/albums" }?["dataless"] as? Bool == true)
        let status = try #require(try await cli.json(["status"]) as? [[String: Any]])
        #expect((status.first?["items"] as? [String: Any])?["datalessFolders"] as? Int == 4)
        let why = try await cli.run(["why", "d:/albums/a1"])
        #expect(why.stdout.contains("dataless folder"), "\(why.stdout)")

        let populated = try await cli.run(["populate", "d:/albums/a1/photo4.jpg"])
        #expect(populated.status == 0, "\(populated.stderr)")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("albums/a1/photo4.jpg.placeholder").path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: replica.appendingPathComponent("albums/a0").path).isEmpty)
        #expect(try await cli.run(["populate", "-R", "d:/"]).status == 0)
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("albums/a0/photo9.jpg.placeholder").path))
        let after = try #require(try await cli.json(["status"]) as? [[String: Any]])
        #expect((after.first?["items"] as? [String: Any])?["datalessFolders"] as? Int == 0)

        let missing = try await cli.run(["populate", "d:/no/such/folder"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("sync"), "\(missing.stderr)")
        #expect(try await cli.run(["sync", "d", "--populate-limit", "-1"]).status == 2)
    }
}
