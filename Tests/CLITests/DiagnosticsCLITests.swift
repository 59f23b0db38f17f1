import Foundation
import ProviderTesting
import Testing

/// Issue #36, "a sync that did not do everything" and "diagnostics a user can use", through the
/// real binary: a partial sync exits 3 with a summary line and `status` shows what it left;
/// `-v` prints a line per item transferred; `-vv` a line per request to the store (WebDAV on
/// Apache, SFTP on sshd) with the password never in the output; `--log-file` writes them to a
/// private file with timestamps.
@Suite("Diagnostics (CLI)", .timeLimit(.minutes(5)))
struct DiagnosticsCLITests {
    /// The `problems` object of the one domain `status --json` prints.
    static func problems(_ cli: CLIRunner, _ name: String) async throws -> [String: Any] {
        let json = try await cli.run(["status", name, "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        return try #require(rows.first?["problems"] as? [String: Any], "\(json.stdout)")
    }

    @Test func aSkippedItemMakesAPartialSyncThatStatusShows() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        // A name the replica reserves for placeholders: the item cannot be brought down.
        try temp.write("store/bad.placeholder", Data("x".utf8))
        let cli = CLIRunner(in: temp)
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("store"))

        let sync = try await cli.run(["sync", "d"])
        #expect(sync.status == 3, "\(sync.stdout)\(sync.stderr)")
        #expect(sync.stderr.contains("d:/: skipped an item: \"bad.placeholder\" ends in .placeholder"), "\(sync.stderr)")
        let last = sync.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("d: 1 item skipped; see 'fileproviderctl status d' for why"), "\(sync.stderr)")
        #expect(!last.contains("pending"), "nothing waits to be sent: \(last)")

        let status = try await cli.run(["status", "d"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("  last sync: 1 item skipped\n"), "\(status.stdout)")
        #expect(status.stdout.contains("    skipped /bad.placeholder: \"bad.placeholder\" ends in .placeholder"), "\(status.stdout)")
        var problems = try await Self.problems(cli, "d")
        #expect(problems["skipped"] as? Int == 1 && problems["notSent"] as? Int == 0, "\(problems)")
        let latest = try #require(problems["latest"] as? [[String: Any]])
        #expect(latest.count == 1, "\(latest)")
        #expect(latest.first?["kind"] as? String == "skipped" && latest.first?["path"] as? String == "/bad.placeholder", "\(latest)")
        #expect((latest.first?["reason"] as? String)?.contains("reserved for placeholders") == true, "\(latest)")
        #expect(problems["lastSyncFinishedAt"] as? String != nil, "\(problems)")

        // With --json the reports carry the counts too, and the exit status is the same.
        let json = try await cli.run(["sync", "d", "--json"])
        #expect(json.status == 3, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let report = try #require((object["reports"] as? [[String: Any]])?.first)
        #expect(report["skipped"] as? Int == 1 && report["notSent"] as? Int == 0, "\(report)")

        // Once the store no longer holds it, a sync is whole again and status forgets it.
        try FileManager.default.removeItem(at: temp.url.appendingPathComponent("store/bad.placeholder"))
        let whole = try await cli.run(["sync", "d"])
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(whole.stderr.isEmpty, "\(whole.stderr)")
        problems = try await Self.problems(cli, "d")
        #expect(problems["skipped"] as? Int == 0 && (problems["latest"] as? [Any])?.isEmpty == true, "\(problems)")
        #expect(!(try await cli.run(["status", "d"])).stdout.contains("last sync:"))
    }

    @Test func aChangeTheStoreRefusesMakesAPartialSync() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let (environment, _) = try LiarBackendCLITests.program(temp, named: "liar")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "r", "--backend", "liar", "--behaviour", "refuse-create"],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try await cli.run(["sync", "r"], environment: environment).status == 0)
        try Data("new".utf8).write(to: cli.home.appendingPathComponent("domains/r/new.txt"))

        let sync = try await cli.run(["sync", "r"], environment: environment)
        #expect(sync.status == 3, "\(sync.stdout)\(sync.stderr)")
        #expect(sync.stderr.contains("r:/new.txt: not uploaded: this store takes no new items today"), "\(sync.stderr)")
        let last = sync.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(
            last
                == "r: 1 change not sent; see 'fileproviderctl status r' for why, 'fileproviderctl pending r' for the changes not sent, 'fileproviderctl why r:/PATH' for one item",
            "\(sync.stderr)")

        let problems = try await Self.problems(cli, "r")
        #expect(problems["notSent"] as? Int == 1 && problems["skipped"] as? Int == 0, "\(problems)")
        let latest = try #require(problems["latest"] as? [[String: Any]])
        #expect(latest.first?["kind"] as? String == "notSent" && latest.first?["path"] as? String == "/new.txt", "\(latest)")
        #expect((latest.first?["reason"] as? String)?.contains("this store takes no new items today") == true, "\(latest)")
        let status = try await cli.run(["status", "r"], environment: environment)
        #expect(status.stdout.contains("  last sync: 1 change not sent\n"), "\(status.stdout)")
        #expect(status.stdout.contains("    not sent /new.txt: not uploaded: this store takes no new items today"), "\(status.stdout)")
        // Still refused: every sync says so again.
        #expect(try await cli.run(["sync", "r"], environment: environment).status == 3)
    }

    @Test func verboseSyncPrintsALinePerItemTransferred() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        try temp.write("store/old.txt", Data("o".utf8))
        let cli = CLIRunner(in: temp)
        let store = temp.url.appendingPathComponent("store")
        try await cli.addLocalDomain("v", root: store, sync: true)
        #expect(try await cli.run(["policy", "v:/a.txt", "eager"]).status == 0)
        try Data("new".utf8).write(to: cli.home.appendingPathComponent("domains/v/new.txt"))
        try FileManager.default.removeItem(at: store.appendingPathComponent("old.txt"))

        let quiet = try await cli.run(["sync", "v"])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "no item lines without -v: \(quiet.stderr)")
        try Data("again".utf8).write(to: cli.home.appendingPathComponent("domains/v/again.txt"))
        try FileManager.default.removeItem(at: store.appendingPathComponent("a.txt"))

        let verbose = try await cli.run(["sync", "-v", "v"])
        #expect(verbose.status == 0, "\(verbose.stderr)")
        #expect(verbose.stderr.contains("v:/again.txt: uploaded (new file)"), "\(verbose.stderr)")
        #expect(verbose.stderr.contains("v:/a.txt: removed (deleted in the store)"), "\(verbose.stderr)")
        #expect(!verbose.stderr.contains("HTTP ") && !verbose.stderr.contains("SFTP "), "no request lines at -v")

        try temp.write("store/b.txt", Data("b".utf8))
        #expect(try await cli.run(["policy", "v:/", "eager"]).status == 0)
        let downloads = try await cli.run(["sync", "-v", "v"])
        #expect(downloads.stderr.contains("v:/b.txt: downloaded"), "\(downloads.stderr)")
    }

    @Test func requestLinesOfWebDAVNeverShowThePassword() async throws {
        let password = "s3cret pw-\(UUID().uuidString.prefix(6))"
        let server = try await offThePool { try ApacheDAVServer(users: ["alice": password]) }
        defer { server.stop() }
        let url = try server.makeFolder()
        let folder = String(url.dropFirst(server.rootURL.count + 1))
        try server.writeFile(folder + "/hello.txt", Data("hello".utf8))
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = ["FPK_DIAG_PASSWORD": password]
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "w", "--backend", "webdav", "--url", url, "--user", "alice",
                "--password-env", "FPK_DIAG_PASSWORD",
            ],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")

        let sync = try await cli.run(["sync", "-vv", "w"], environment: environment)
        #expect(sync.status == 0, "\(sync.stderr)")
        let lines = sync.stderr.split(separator: "\n").filter { $0.contains("HTTP PROPFIND ") }
        #expect(!lines.isEmpty, "\(sync.stderr)")
        #expect(lines.contains { $0.contains("\(url)/") && $0.contains("auth=basic -> 207, sent ") && $0.contains(" ms") }, "\(lines)")
        #expect(!(sync.stdout + sync.stderr).contains(password), "the password was printed")
        #expect(!(sync.stdout + sync.stderr).contains("Authorization: Basic "), "the credentials were printed")

        // Into a private file with timestamps instead of standard error.
        let log = temp.url.appendingPathComponent("logs/fp.log")
        try FileManager.default.createDirectory(at: log.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("an earlier line\n".utf8).write(to: log)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: log.path)
        let materialize = try await cli.run(["materialize", "-vv", "--log-file", log.path, "w:/hello.txt"], environment: environment)
        #expect(materialize.status == 0, "\(materialize.stderr)")
        #expect(!materialize.stderr.contains("HTTP "), "log lines went to the file only: \(materialize.stderr)")
        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.hasPrefix("an earlier line\n"), "appended: \(text)")
        let get = text.split(separator: "\n").first { $0.contains("HTTP GET \(url)/hello.txt") }
        #expect(get != nil, "\(text)")
        if let get {
            #expect(
                get.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z trace fileprovider\.http: "#, options: .regularExpression) != nil,
                "\(get)")
            // One stream per two cores from a server on this machine: a plain `GET` (`200`) on
            // two or three cores; with more, a download asks for its first 16 MiB (a `206`).
            let status = ProcessInfo.processInfo.activeProcessorCount >= 4 ? 206 : 200
            #expect(get.contains("-> \(status), sent 0 B, received 5 B"), "\(get)")
        }
        #expect(text.contains(" debug fileprovider.engine: w:/hello.txt: materialized\n"), "\(text)")
        #expect(!text.contains(password), "the password was written to the log")
        let mode = try FileManager.default.attributesOfItem(atPath: log.path)[.posixPermissions] as? Int
        #expect(mode == 0o600, "mode \(String(mode ?? 0, radix: 8))")
    }

    @Test func requestLinesOfSFTPNeverShowThePassphrase() async throws {
        let server = try await SSHServer.shared()
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        // The server's user key, protected by a passphrase here.
        let passphrase = "correct horse \(UUID().uuidString.prefix(6))"
        let key = temp.url.appendingPathComponent("id_protected")
        try FileManager.default.copyItem(at: server.userKey, to: key)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key.path)
        let rekeyed = try await offThePool {
            try ChildProcess.capture("/usr/bin/ssh-keygen", ["-q", "-p", "-P", "", "-N", passphrase, "-f", key.path])
        }
        #expect(rekeyed.ending == .exited(0), "\(String(decoding: rekeyed.errorOutput, as: UTF8.self))")
        let root = try server.makeFolder()
        try Data("hello".utf8).write(to: URL(fileURLWithPath: root).appendingPathComponent("hello.txt"))
        let userHome = temp.url.appendingPathComponent("user")
        try FileManager.default.createDirectory(at: userHome, withIntermediateDirectories: true)
        let environment = ["FPK_DIAG_PASSPHRASE": passphrase, "SSH_AUTH_SOCK": "", "HOME": userHome.path]
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "s", "--backend", "sftp", "--host", "127.0.0.1", "--port",
                String(server.port), "--user", server.user,
                "--known-hosts", server.knownHosts.path, "--root", root, "--identity", key.path, "--passphrase-env",
                "FPK_DIAG_PASSPHRASE",
            ], environment: environment)
        #expect(added.status == 0, "\(added.stderr)")

        let sync = try await cli.run(["sync", "-vv", "s"], environment: environment)
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(sync.stderr.contains("SFTP READDIR 127.0.0.1 / -> ok, "), "\(sync.stderr)")
        let materialize = try await cli.run(["materialize", "--log-level", "trace", "s:/hello.txt"], environment: environment)
        #expect(materialize.status == 0, "\(materialize.stderr)")
        #expect(materialize.stderr.contains("SFTP GET 127.0.0.1 /hello.txt -> ok, 5 B, "), "\(materialize.stderr)")
        for output in [sync, materialize] {
            #expect(!(output.stdout + output.stderr).contains(passphrase), "the passphrase was printed")
        }
    }

    @Test func serveWritesItsLogToTheFileAndSaysWhenAPassWasPartial() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        try temp.write("store/bad.placeholder", Data("x".utf8))
        let cli = CLIRunner(in: temp)
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("store"))
        let log = temp.url.appendingPathComponent("serve.log")
        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600", "--log-file", log.path, "-v"], log: temp.url.appendingPathComponent("stderr.log"))
        let partial = await waitUntil {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("1 item skipped")
        }
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(partial, "\(text)\(serve.output)")
        let line = text.split(separator: "\n").first { $0.contains("1 item skipped") }.map(String.init) ?? ""
        #expect(line.contains(" warning fileprovider.serve: d: 0 sent, 0 conflicts; "), "\(line)")
        #expect(line.hasSuffix("see 'fileproviderctl status d'"), "\(line)")
        #expect(line.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "#, options: .regularExpression) != nil, "\(line)")
        #expect(text.contains("warning fileprovider.serve: d:/: skipped an item: \"bad.placeholder\""), "\(text)")
        let problems = try await Self.problems(cli, "d")
        #expect(problems["skipped"] as? Int == 1, "\(problems)")
        #expect(await serve.stop() == 0)
        #expect(!serve.output.contains("fileprovider.serve"), "log lines went to the file only: \(serve.output)")
        let mode = try FileManager.default.attributesOfItem(atPath: log.path)[.posixPermissions] as? Int
        #expect(mode == 0o600, "mode \(String(mode ?? 0, radix: 8))")
    }

    @Test func requestLinesOfAnExternalProgram() async throws {
        let temp = try TemporaryFolder()
        try temp.write("store/a.txt", Data("a".utf8))
        let cli = CLIRunner(in: temp)
        let environment = ExternalBackendCLITests.environment(temp)
        let root = temp.url.appendingPathComponent("store").path
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "x", "--backend", "pyfolder", "--root", root], environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let sync = try await cli.run(["sync", "-vv", "x"], environment: environment)
        #expect(sync.status == 0, "\(sync.stderr)")
        let lines = sync.stderr.split(separator: "\n")
        #expect(
            lines.contains { $0.contains("external fileprovider-backend-pyfolder open {\"options\":{\"root\":\"\(root)\"}} -> ok, ") },
            "\(sync.stderr)")
        #expect(
            lines.contains { $0.contains("external fileprovider-backend-pyfolder enumerate {") && $0.contains("-> ok, ") }, "\(sync.stderr)"
        )
    }

    @Test func requestLinesOfTheMediaAPINeverShowTheToken() async throws {
        let token = "tok-\(UUID().uuidString)"
        let server = try await offThePool {
            try MediaServer(arguments: ["--token-env", "FPK_DIAG_TOKEN"], environment: ["FPK_DIAG_TOKEN": token])
        }
        defer { server.stop() }
        let name = try server.makeFolder()
        try Data("hello".utf8).write(to: server.root.appendingPathComponent(name).appendingPathComponent("hello.txt"))
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = ["FPK_DIAG_TOKEN": token]
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "m", "--backend", "media", "--url", server.url, "--root", name,
                "--token-env", "FPK_DIAG_TOKEN",
            ],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let sync = try await cli.run(["sync", "-vv", "m"], environment: environment)
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(
            sync.stderr.split(separator: "\n").contains { $0.contains("HTTP GET \(server.url)/") && $0.contains(" auth=bearer -> 200, ") },
            "\(sync.stderr)")
        #expect(!(sync.stdout + sync.stderr).contains(token), "the token was printed")
    }
}
