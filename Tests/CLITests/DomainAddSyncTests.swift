import Foundation
import Testing

/// `domain add --sync` through the real binary: the domain is added and synced in one command,
/// as `domain add` then `sync` would do it, with the exit statuses of `sync`; the domain stays
/// added when its first sync is partial or fails.
@Suite struct DomainAddSyncTests {
    @Test func addsAndSyncsInOneCommand() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        try temp.write("store/f/b.txt", Data("bb".utf8))
        let cli = CLIRunner(in: temp)
        let store = temp.url.appendingPathComponent("store").path
        // --sync after the backend options is still domain add's own flag.
        let added = try await cli.run([
            "domain", "add", "d", "--mode", "placeholder-files", "--backend", "local", "--root", store, "--sync",
        ])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout.contains("added domain 'd' (local)"), "\(added.stdout)")
        #expect(added.stdout.contains("d: 0 local changes sent, 0 conflicts; 3 items listed, 3 added,"), "\(added.stdout)")
        #expect(!added.stdout.contains("next: fileproviderctl sync"), "\(added.stdout)")
        let replica = temp.url.appendingPathComponent("home/domains/d")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt.placeholder").path))

        let again = try await cli.run(["sync", "d"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("3 items listed, 0 added, 0 updated"), "\(again.stdout)")

        // --json: the domain object with the sync's report and its date.
        let json = try await cli.run([
            "domain", "add", "e", "--mode", "placeholder-files", "--backend", "local", "--root", store, "--sync", "--json",
        ])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        #expect(object["name"] as? String == "e" && object["lastSyncAt"] is String, "\(object)")
        let report = try #require(object["sync"] as? [String: Any], "\(object)")
        #expect(report["listedItems"] as? Int == 3 && report["added"] as? Int == 3, "\(report)")

        // Without --sync: nothing listed, and the line says what comes next.
        let plain = try await cli.run(["domain", "add", "p", "--mode", "placeholder-files", "--backend", "local", "--root", store])
        #expect(plain.status == 0 && plain.stdout.contains("next: fileproviderctl sync p"), "\(plain.stdout)\(plain.stderr)")
        #expect(!FileManager.default.fileExists(atPath: temp.url.appendingPathComponent("home/domains/p/a.txt.placeholder").path))
    }

    /// A first sync that skips an item exits 3 with `sync`'s summary line; the domain is added.
    @Test func aPartialFirstSyncExitsThreeAndKeepsTheDomain() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        try temp.write("store/bad.placeholder", Data("x".utf8))
        let cli = CLIRunner(in: temp)
        let added = try await cli.run(
            [
                "domain", "add", "d", "--mode", "placeholder-files", "--backend", "local", "--root",
                temp.url.appendingPathComponent("store").path, "--sync",
            ])
        #expect(added.status == 3, "\(added.stdout)\(added.stderr)")
        let last = added.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("d: 1 item skipped; see 'fileproviderctl status d' for why"), "\(added.stderr)")
        let list = try await cli.run(["domain", "list"])
        #expect(list.status == 0 && list.stdout.contains("d"), "\(list.stdout)\(list.stderr)")
    }

    /// A store that stops answering during the first sync: exit 1 with `sync`'s error line; the
    /// domain stays added (and backs off, as after any failed sync).
    @Test(.timeLimit(.minutes(2))) func aFirstSyncTheStoreBreaksOffFailsAndKeepsTheDomain() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let (environment, _) = try LiarBackendCLITests.program(temp, named: "liar")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "dying", "--backend", "liar", "--behaviour", "die-in-subfolder", "--sync"],
            environment: environment)
        #expect(added.status == 1, "\(added.stdout) \(added.stderr)")
        #expect(added.stdout.contains("added domain 'dying'"), "\(added.stdout)")
        #expect(added.stderr.contains("error: dying: the store stopped answering during the sync"), "\(added.stderr)")
        let status = try await cli.run(["status", "dying", "--json"], environment: environment)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("nextRetryAt") || status.stdout.contains("backoff"), "\(status.stdout)")
    }
}
