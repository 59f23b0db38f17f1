import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `fileproviderctl policy`, its aliases `pin` and `unpin`, and how `ls`, `why` and `sync` show
/// and apply content policies.
@Suite struct PolicyCLITests {
    /// A local domain `d` over `src` with photos/2023/{a,b}.jpg, photos/2024/c.jpg and notes.txt.
    private func makeDomain(_ temp: TemporaryFolder) async throws -> CLIRunner {
        let cli = CLIRunner(in: temp)
        try temp.write("src/photos/2023/a.jpg", Data("a".utf8))
        try temp.write("src/photos/2023/b.jpg", Data("bb".utf8))
        try temp.write("src/photos/2024/c.jpg", Data("ccc".utf8))
        try temp.write("src/notes.txt", Data("notes".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), sync: true)
        return cli
    }

    @Test func setShowInheritAndOverride() async throws {
        let temp = try TemporaryFolder()
        let cli = try await makeDomain(temp)
        let replica = cli.home.appendingPathComponent("domains/d")

        // Shown before anything is set: the default.
        let before = try await cli.run(["policy", "d:/photos/2023/a.jpg"])
        #expect(before.status == 0 && before.stdout == "d:/photos/2023/a.jpg: lazy (the default)\n", "\(before.stderr)")

        let eager = try await cli.run(["policy", "d:/photos", "eager"])
        #expect(eager.status == 0, "\(eager.stderr)")
        #expect(eager.stdout == "d:/photos: eager (set on it)\ndownloaded 3 items\n")
        #expect(try String(contentsOf: replica.appendingPathComponent("photos/2024/c.jpg"), encoding: .utf8) == "ccc")

        // Overridden below, then shown for several items at once.
        #expect(
            try await cli.run(["policy", "d:/photos/2023", "evict-on-remote-update"]).stdout
                == "d:/photos/2023: evict-on-remote-update (set on it)\n")
        let shown = try await cli.run([
            "policy", "d:/photos/2023/a.jpg", "d:/photos/2024/c.jpg", replica.appendingPathComponent("notes.txt").path,
        ])
        #expect(
            shown.stdout
                == """
                d:/photos/2023/a.jpg: evict-on-remote-update (through d:/photos/2023)
                d:/photos/2024/c.jpg: eager (through d:/photos)
                d:/notes.txt: lazy (the default)

                """)
        let rows = try #require(try await cli.json(["policy", "d:/photos/2023/a.jpg", "d:/notes.txt"]) as? [[String: Any]])
        #expect(rows.count == 2)
        #expect(rows[0]["path"] as? String == "d:/photos/2023/a.jpg" && rows[0]["policy"] as? String == "evict-on-remote-update")
        #expect(rows[0]["setOn"] as? String == "d:/photos/2023")
        #expect(rows[1]["setOn"] is NSNull)

        // Set on the folder again: the policy below goes, and it says so.
        let again = try await cli.run(["policy", "d:/photos", "lazy"])
        #expect(
            again.stdout
                == "d:/photos: lazy (set on it); the policies set below it were removed (1 item: d:/photos/2023)\n")
        #expect(try await cli.run(["policy", "d:/photos/2023/a.jpg"]).stdout == "d:/photos/2023/a.jpg: lazy (through d:/photos)\n")

        // inherit; --json of a change.
        let inherit = try #require(try await cli.json(["policy", "d:/photos", "inherit"]) as? [String: Any])
        let policies = try #require(inherit["policies"] as? [[String: Any]])
        #expect(policies.first?["path"] as? String == "d:/photos" && policies.first?["policy"] as? String == "lazy")
        #expect(policies.first?["setOn"] is NSNull)
        #expect((inherit["items"] as? [Any])?.isEmpty == true)

        // An unknown item fails, the others are set.
        let partly = try await cli.run(["policy", "d:/nope", "d:/notes.txt", "eager"])
        #expect(partly.status == 1)
        #expect(partly.stderr.contains("error: no item at d:/nope"), "\(partly.stderr)")
        #expect(partly.stdout.hasPrefix("d:/notes.txt: eager (set on it)\n"), "\(partly.stdout)")
        // No item named: a usage error.
        #expect(try await cli.run(["policy", "eager"]).status == 2)
    }

    @Test func helpExplainsEachPolicyWithApplesAndCfapisNames() async throws {
        let cli = CLIRunner(home: try TemporaryFolder().url)
        let help = try await cli.run(["policy", "--help"], withHome: false)
        #expect(help.status == 0)
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for word in [
            "lazy:", "eager:", "evict-on-remote-update:", "online-only:", "inherit:", "downloadLazily", "downloadEagerlyAndKeepDownloaded",
            "downloadLazilyAndEvictOnRemoteUpdate", "pinned", "unpinned", "unspecified", "removes the policies set on the items below it",
        ] {
            #expect(text.contains(word), "\(word) is not in: \(help.stdout)")
        }
        #expect(try await cli.run(["unpin", "--help"], withHome: false).stdout.contains("online-only"))
        #expect(try await cli.run(["pin", "--help"], withHome: false).stdout.contains("eager"))
    }

    @Test func lsAndWhyShowThePolicyAndWhereItIsSet() async throws {
        let temp = try TemporaryFolder()
        let cli = try await makeDomain(temp)
        #expect(try await cli.run(["pin", "d:/photos/2023"]).status == 0)
        #expect(try await cli.run(["policy", "d:/notes.txt", "online-only"]).status == 0)

        // STATE, POLICY ('*': set on the item itself), SIZE, MODIFIED, NAME.
        let listing = try await cli.run(["ls", "-R", "d:/photos"])
        let rows = listing.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        let columns = Dictionary(uniqueKeysWithValues: rows.map { ($0.last ?? "", Array($0.prefix(2))) })
        #expect(columns["2023/"] == ["folder", "eager*"], "\(listing.stdout)")
        #expect(columns["2023/a.jpg"] == ["materialized", "eager"], "\(listing.stdout)")
        #expect(columns["2024/c.jpg"] == ["placeholder", "lazy"], "\(listing.stdout)")
        #expect(listing.stdout.split(separator: "\n").first?.hasPrefix("folder                eager*                  ") == true)

        let items = try #require(try await cli.json(["ls", "-R", "d:/"]) as? [[String: Any]])
        let byPath = Dictionary(uniqueKeysWithValues: items.map { ($0["path"] as? String ?? "", $0) })
        #expect(byPath["/photos/2023/b.jpg"]?["policy"] as? String == "eager")
        #expect(byPath["/photos/2023/b.jpg"]?["policySetOn"] as? String == "/photos/2023")
        #expect(byPath["/photos/2023/b.jpg"]?["pinned"] as? Bool == true)
        #expect(byPath["/notes.txt"]?["policy"] as? String == "online-only")
        #expect(byPath["/notes.txt"]?["policySetOn"] as? String == "/notes.txt")
        #expect(byPath["/photos/2024"]?["policy"] as? String == "lazy")
        #expect(byPath["/photos/2024"]?["policySetOn"] is NSNull)

        let why = try await cli.run(["why", "d:/photos/2023/a.jpg"])
        #expect(why.stdout.contains("  - eager through d:/photos/2023: pinned: kept downloaded and never evicted"), "\(why.stdout)")
        let whyJSON = try #require(try await cli.json(["why", "d:/notes.txt"]) as? [String: Any])
        #expect(whyJSON["policy"] as? String == "online-only" && whyJSON["policySetOn"] as? String == "/notes.txt")
        #expect((whyJSON["reasons"] as? [String])?.contains { $0.hasPrefix("online-only (set on this item): unpinned:") } == true)
    }

    @Test func unpinEvictsNowAndRefusesAnEditedFile() async throws {
        let temp = try TemporaryFolder()
        let cli = try await makeDomain(temp)
        let replica = cli.home.appendingPathComponent("domains/d")
        #expect(try await cli.run(["pin", "d:/photos"]).status == 0)
        try Data("edited here".utf8).write(to: replica.appendingPathComponent("photos/2023/b.jpg"))

        let unpinned = try await cli.run(["unpin", "d:/photos"])
        #expect(unpinned.status == 1)
        #expect(unpinned.stdout == "d:/photos: online-only (set on it)\nevicted 2 items, 1 failed\n", "\(unpinned.stdout)")
        #expect(
            unpinned.stderr
                == "error: d:/photos/2023/b.jpg has local changes that are not uploaded; not evicted now (online-only: evicted once a sync has uploaded them)\n"
        )
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("photos/2023/a.jpg.placeholder").path))
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("photos/2023/a.jpg").path))
        #expect(try String(contentsOf: replica.appendingPathComponent("photos/2023/b.jpg"), encoding: .utf8) == "edited here")
        // Evictable by hand now.
        #expect(try await cli.run(["materialize", "d:/photos/2024/c.jpg"]).status == 0)
        #expect(try await cli.run(["evict", "d:/photos/2024/c.jpg"]).status == 0)
    }

    @Test func evictOnRemoteUpdateTurnsARemoteEditIntoAnEviction() async throws {
        let temp = try TemporaryFolder()
        let cli = try await makeDomain(temp)
        let replica = cli.home.appendingPathComponent("domains/d")
        #expect(try await cli.run(["materialize", "-R", "d:/photos"]).status == 0)
        #expect(try await cli.run(["policy", "d:/photos/2023", "evict-on-remote-update"]).status == 0)
        try temp.write("src/photos/2023/a.jpg", Data("a, edited in the store".utf8))
        try temp.write("src/photos/2024/c.jpg", Data("c, edited in the store".utf8))

        let sync = try await cli.run(["sync", "d"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(sync.stdout.contains("1 downloaded, 1 evicted (changed in the store)"), "\(sync.stdout)")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("photos/2023/a.jpg").path))
        let placeholder = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: replica.appendingPathComponent("photos/2023/a.jpg.placeholder")))
                as? [String: Any])
        #expect(placeholder["size"] as? Int == 22)
        #expect(try String(contentsOf: replica.appendingPathComponent("photos/2024/c.jpg"), encoding: .utf8) == "c, edited in the store")
        #expect(try String(contentsOf: replica.appendingPathComponent("photos/2023/b.jpg"), encoding: .utf8) == "bb")
    }
}

/// Content policies in a served `dataless` domain (root, ext4: see `make test`).
@Suite("Content policies of on-access files", .serialized, .timeLimit(.minutes(5)))
struct DatalessPolicyCLITests {
    @Test func evictOnRemoteUpdateLeavesADatalessFileOfTheNewSizeWithoutFetching() async throws {
        let temp = try TemporaryFolder()
        let storeFolder = temp.url.appendingPathComponent("store").path
        let first = patterned(1_000_000, seed: 1)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: storeFolder, backend: "local", options: ["root": storeFolder], files: ["v/a.bin": first])
        try await domain.startServe()
        #expect(try await runProgram(["cat", domain.replica + "/v/a.bin"]).output == first)
        #expect(await domain.fetches(of: "v/a.bin", reaching: 1) == 1, "\(domain.logs)")
        #expect(try await domain.cli.run(["policy", "d:/v", "evict-on-remote-update"]).status == 0)

        let changed = patterned(1_500_000, seed: 2)
        try domain.write("v/a.bin", changed)
        #expect(try await domain.cli.run(["signal", "d"]).status == 0)
        let evicted = await waitUntil(timeout: 30) {
            (try? await domain.cli.json(["ls", "d:/v"]) as? [[String: Any]])?.contains {
                ($0["state"] as? String) == "placeholder" && ($0["size"] as? Int) == 1_500_000
            } == true
        }
        #expect(evicted, "\(domain.logs)")
        let status = try #require(fileStatus(domain.backing + "/v/a.bin"))
        #expect(status.st_size == 1_500_000 && status.st_blocks <= 8, "size \(status.st_size), blocks \(status.st_blocks)")
        #expect(!domain.logs.contains("1 downloaded"), "\(domain.logs)")
        // The next read fetches the new contents.
        #expect(try await runProgram(["cat", domain.replica + "/v/a.bin"]).output == changed)
        #expect(await domain.fetches(of: "v/a.bin", reaching: 2) == 2, "\(domain.logs)")
        try await domain.stopServe()
    }
}
