import Foundation
import ProviderStore
import ProviderTesting
import Testing

/// Domains whose backend this `fileproviderctl` does not have (a kind another tool links, an
/// external backend that is not installed): skipped with a warning, never a failure of the
/// others, nothing recorded on them, and `status` / `domain list` say so.
@Suite struct MissingBackendTests {
    /// Two local domains, then one of them turned into a kind this program does not know, as a
    /// program of its own that links the engine with another backend would have added it.
    static func setUp(_ temp: TemporaryFolder) async throws -> CLIRunner {
        let cli = CLIRunner(in: temp)
        for name in ["here", "elsewhere"] {
            try temp.write("\(name)/a.txt", Data(name.utf8))
            try await cli.addLocalDomain(name, root: temp.url.appendingPathComponent(name))
        }
        let database = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        var record = try #require(try database.domain(named: "elsewhere"))
        record.backendKind = "jsonstore"
        try database.updateDomain(record)
        return cli
    }

    @Test func syncOfAllDomainsSkipsItWithAWarningAndSucceeds() async throws {
        let temp = try TemporaryFolder()
        let cli = try await Self.setUp(temp)

        let sync = try await cli.run(["sync"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(sync.stdout.contains("here: "), "\(sync.stdout)")
        #expect(!sync.stdout.contains("elsewhere"), "\(sync.stdout)")
        let warnings = sync.stderr.split(separator: "\n").filter { $0.contains("elsewhere") }
        #expect(warnings.count == 1 && warnings[0].contains("backend 'jsonstore' not available"), "\(sync.stderr)")
        #expect(FileManager.default.fileExists(atPath: cli.home.appendingPathComponent("domains/here/a.txt.placeholder").path))

        let json = try #require(try await cli.json(["sync"]) as? [String: Any])
        #expect((json["failures"] as? [Any])?.isEmpty == true)
        let skipped = try #require(json["skipped"] as? [[String: Any]])
        #expect(skipped.count == 1 && skipped[0]["domain"] as? String == "elsewhere")
        #expect(skipped[0]["reason"] as? String == "backend not available")

        // Named, it is an error (exit 1) of its own code, and still nothing is recorded.
        let named = try await cli.run(["sync", "elsewhere"])
        #expect(named.status == 1)
        #expect(named.stderr.contains("'jsonstore', which is not available here"), "\(named.stderr)")

        let database = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        let record = try #require(try database.domain(named: "elsewhere"))
        #expect(record.lastError == nil && record.failureCount == 0 && record.lastSyncAt == nil)
    }

    @Test func statusAndDomainListSayBackendNotAvailable() async throws {
        let temp = try TemporaryFolder()
        let cli = try await Self.setUp(temp)

        let status = try await cli.run(["status"])
        #expect(status.status == 0)
        let line = try #require(status.stdout.split(separator: "\n").first { $0.hasPrefix("elsewhere ") })
        #expect(line.contains("backend not available"), "\(status.stdout)")
        #expect(!(status.stdout.split(separator: "\n").first { $0.hasPrefix("here ") } ?? "").contains("not available"))

        let show = try await cli.run(["domain", "show", "elsewhere"])
        #expect(show.stdout.contains("backend:      jsonstore (backend not available: not synced here)"), "\(show.stdout)")
        let list = try await cli.run(["domain", "list"])
        #expect(list.stdout.contains("jsonstore (backend not available)"), "\(list.stdout)")
        for arguments in [["domain", "list"], ["status"]] {
            let domains = try #require(try await cli.json(arguments) as? [[String: Any]])
            let available = Dictionary(uniqueKeysWithValues: domains.map { ($0["name"] as? String ?? "", $0["backendAvailable"] as? Bool) })
            #expect(available == ["here": true, "elsewhere": false], "\(arguments)")
        }
    }

    @Test func serveSkipsItWithAWarningAndServesTheOthers() async throws {
        let temp = try TemporaryFolder()
        let cli = try await Self.setUp(temp)
        let serve = try ServeProcess(cli, ["--poll-interval", "3600"], log: temp.url.appendingPathComponent("serve.log"))
        let synced = try await waitUntil {
            let domains = try await cli.json(["status"]) as? [[String: Any]]
            return domains?.first { $0["name"] as? String == "here" }?["lastSyncAt"] != nil
        }
        #expect(synced, "\(serve.output)")
        #expect(await serve.stop() == 0)
        let lines = serve.output.split(separator: "\n").filter { $0.contains("elsewhere") }
        #expect(lines.count == 1 && lines[0].contains("not serving elsewhere: backend 'jsonstore' not available"), "\(serve.output)")
        let database = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        let record = try #require(try database.domain(named: "elsewhere"))
        #expect(record.lastError == nil && record.failureCount == 0)

        // Only domains whose backends are missing: nothing to serve, said plainly.
        let only = try await cli.run(["serve", "elsewhere"])
        #expect(only.status == 1)
        #expect(only.stderr.contains("backends of the connected domains are not available"), "\(only.stderr)")
    }
}
