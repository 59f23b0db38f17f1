import Foundation
import ProviderTesting
import Testing

/// The real `fileproviderctl` against ``HostileSFTPServer`` (paramiko answering anything on
/// 127.0.0.1): `sync` ends (3, a partial sync, or 1), the bad items are reported as warnings and not recorded,
/// `materialize -R` ends with 0 or 1 (never a signal), `ls` never shows a negative size.
@Suite("Hostile stores (CLI)", .timeLimit(.minutes(5)))
struct HostileStoreCLITests {
    @Test func syncMaterializeAndLsSurviveAHostileSFTPServer() async throws {
        try await HostileSFTPServer.withStarted { server in
            let temp = try TemporaryFolder()
            let cli = CLIRunner(in: temp)
            let add =
                ["domain", "add", "--mode", "placeholder-files", "evil", "--backend", "sftp"]
                + server.options().sorted(by: { $0.key < $1.key }).flatMap { ["--\($0.key)", $0.value] }
            let added = try await cli.run(add)
            #expect(added.status == 0, "\(added.stderr)")

            let sync = try await cli.run(["sync", "evil"])
            // Items skipped: a partial sync (3), or a failure (1) when the server's lies break more.
            #expect(sync.status == 3 || sync.status == 1, "sync exited \(sync.status): \(sync.stderr)")
            #expect(sync.stderr.contains("evil:/: skipped an item: \"huge.bin\": its size 18446744073709551615"), "\(sync.stderr)")
            #expect(sync.stderr.contains("skipped an item: \"loop\" is 257 folders deep"), "\(sync.stderr.suffix(2000))")

            let materialize = try await cli.run(["materialize", "-R", "evil:/"])
            #expect(
                materialize.status == 0 || materialize.status == 1,
                "materialize exited \(materialize.status): \(materialize.stderr.suffix(2000))")
            #expect(
                materialize.stderr.contains("short.bin"),
                "the file that sent 40 of its 100 bytes failed: \(materialize.stderr.suffix(2000))")

            let listing = try await cli.run(["ls", "-R", "evil:/", "--json"])
            #expect(listing.status == 0, "\(listing.stderr)")
            let items = try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]] ?? []
            #expect(items.count > 256)
            #expect(items.allSatisfy { ($0["size"] as? Int64 ?? ($0["size"] as? NSNumber)?.int64Value ?? -1) >= 0 })
            #expect(!items.contains { ($0["name"] as? String) == "huge.bin" || ($0["name"] as? String) == "big.bin" })
            let text = try await cli.run(["ls", "evil:/"])
            #expect(text.status == 0)
            #expect(text.stdout.range(of: #"\s-\d+(\.\d+)? [KMGTPE]?i?B"#, options: .regularExpression) == nil, "\(text.stdout)")
        }
    }
}
