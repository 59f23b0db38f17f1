import Foundation
import ProviderTesting
import Testing

/// `fileproviderctl find` answers from the database what GNU `find` answers over a fully
/// downloaded copy of the same stores: two domains (local and SFTP on the test's sshd), names
/// with spaces, UTF-8, newlines and leading dashes.
@Suite("CLI find")
struct FindCLITests {
    /// The files of both stores: relative path, size, days since modified.
    static let localFiles: [(String, Int, Double)] = [
        ("plain.txt", 10, 0), ("with space.pdf", 100, 12), ("ünïcödé.PDF", 3000, 0), ("new\nline.pdf", 1, 3),
        ("-leading.pdf", 600, 0), ("--double dash.txt", 0, 40), ("dir one/inner.pdf", 5000, 0),
        ("dir one/deep/x.bin", 9000, 8), ("Photos/IMG_001.JPG", 70_000, 0), ("été.txt", 2, 0),
    ]
    static let remoteFiles: [(String, Int, Double)] = [
        ("shared/with space.pdf", 100, 12), ("-dash.pdf", 7, 0), ("été.txt", 2, 20), ("new\nline.txt", 5, 0),
        ("shared/sub dir/Report.Pdf", 1025, 2),
    ]

    /// Writes `files` below `root`, each with its modification date.
    static func write(_ files: [(String, Int, Double)], below root: URL) throws {
        for (path, size, days) in files {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(repeating: 0x61, count: size).write(to: url)
            let date = Date().addingTimeInterval(-days * 86_400 - 600)
            try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: url.path)
        }
    }

    /// The two domains, synced and fully downloaded: `loc` and `remote`, with their replicas.
    static func setUp(_ temp: TemporaryFolder, _ cli: CLIRunner) async throws -> [(String, URL)] {
        let server = try await SSHServer.shared()
        let localRoot = temp.url.appendingPathComponent("store")
        try write(localFiles, below: localRoot)
        let remoteRoot = URL(fileURLWithPath: try server.makeFolder())
        try write(remoteFiles, below: remoteRoot)
        try await cli.addLocalDomain("loc", root: localRoot, options: ["--replica", temp.url.appendingPathComponent("loc").path])
        var arguments = [
            "domain", "add", "--mode", "placeholder-files", "remote", "--backend", "sftp", "--replica",
            temp.url.appendingPathComponent("remote").path,
        ]
        for (key, value) in server.options(root: remoteRoot.path).sorted(by: { $0.key < $1.key }) { arguments += ["--\(key)", value] }
        let added = try await cli.run(arguments)
        #expect(added.status == 0, "\(added.stderr)")
        for domain in ["loc", "remote"] {
            let synced = try await cli.run(["sync", domain])
            #expect(synced.status == 0, "\(synced.stderr)")
        }
        return [("loc", temp.url.appendingPathComponent("loc")), ("remote", temp.url.appendingPathComponent("remote"))]
    }

    /// GNU find's environment: a UTF-8 locale, as `fileproviderctl find` always matches in.
    static let utf8 = ProcessInfo.processInfo.environment.merging(["LC_ALL": "C.UTF-8"]) { $1 }

    /// What GNU find prints for `tests` over the replicas, as `DOMAIN:/path`.
    static func gnuFind(_ replicas: [(String, URL)], _ tests: [String]) async throws -> Set<String> {
        var found: Set<String> = []
        for (domain, replica) in replicas {
            let result = try await offThePool {
                try ChildProcess.capture(
                    "/usr/bin/find", [replica.path, "-mindepth", "1", "-regextype", "posix-extended"] + tests + ["-print0"],
                    environment: Self.utf8)
            }
            #expect(result.ending == .exited(0), "\(String(decoding: result.errorOutput, as: UTF8.self))")
            for path in result.output.split(separator: 0) {
                let text = String(decoding: path, as: UTF8.self)
                found.insert(domain + ":" + text.dropFirst(replica.path.count))
            }
        }
        return found
    }

    /// What `fileproviderctl find` prints for `tests` with -print0.
    /// `page`: the rows read at once (`FILEPROVIDERCTL_PAGE`), small to make every search cross pages.
    static func ours(_ cli: CLIRunner, _ tests: [String], _ extra: [String] = [], page: Int? = nil) async throws -> Set<String> {
        let environment = page.map { ["FILEPROVIDERCTL_PAGE": String($0)] } ?? [:]
        let result = try await cli.run(["find"] + tests + extra + ["-print0"], environment: environment)
        #expect(result.status == 0, "find \(tests): \(result.stderr)")
        return Set(result.stdout.split(separator: "\0", omittingEmptySubsequences: true).map(String.init))
    }

    @Test func matchesGNUFindOverAFullyDownloadedCopy() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let replicas = try await Self.setUp(temp, cli)
        // Before anything is downloaded every file is dataless, and found by its real name.
        let dataless = try await Self.ours(cli, ["-name", "*.pdf", "--state", "dataless"])
        #expect(dataless.contains("loc:/with space.pdf") && dataless.contains("remote:/-dash.pdf"), "\(dataless)")
        #expect(try await Self.ours(cli, ["--state", "downloaded"]).isEmpty)
        for domain in ["loc", "remote"] {
            let materialized = try await cli.run(["materialize", "-R", "\(domain):/"])
            #expect(materialized.status == 0, "\(materialized.stderr)")
        }
        let cases: [[String]] = [
            ["-name", "*.pdf"], ["-iname", "*.pdf"], ["-name", "-*"], ["-name", "*\n*"], ["-name", "?t?.txt"],
            ["-name", "[!a-z]*"], ["-iname", "ÜNÏ*"], ["-path", "*/dir one/*"], ["-ipath", "*/SHARED/*"],
            ["-regex", ".*/(dir one|shared)/.*\\.[pP][dD][fF]"], ["-iregex", ".*report.*"], ["-type", "d"],
            ["-type", "f", "-size", "+4k"], ["-type", "f", "-size", "-2"], ["-type", "f", "-size", "1025c"],
            ["-type", "f", "-size", "2k"], ["-type", "f", "-mtime", "+5"], ["-type", "f", "-mtime", "-1"],
            ["-type", "f", "-mtime", "2"], ["-type", "f", "-name", "*.txt", "-mmin", "-100"],
        ]
        for tests in cases {
            let expected = try await Self.gnuFind(replicas, tests)
            let found = try await Self.ours(cli, tests)
            #expect(found == expected, "\(tests): find printed \(expected.sorted()), fileproviderctl \(found.sorted())")
            #expect(try await Self.ours(cli, tests, page: 2) == expected, "\(tests) in pages of 2 rows")
            #expect(!expected.isEmpty || tests == ["-type", "f", "-mtime", "2"], "\(tests) matches nothing: a weak case")
        }
        // --local prints the replica paths GNU find prints.
        let local = try await cli.run(["find", "-name", "*.pdf", "--local", "-print0"])
        var gnu: Set<String> = []
        for (_, replica) in replicas {
            let result = try await offThePool {
                try ChildProcess.capture("/usr/bin/find", [replica.path, "-name", "*.pdf", "-print0"], environment: Self.utf8)
            }
            gnu.formUnion(result.output.split(separator: 0).map { String(decoding: $0, as: UTF8.self) })
        }
        #expect(Set(local.stdout.split(separator: "\0").map(String.init)) == gnu)
        #expect(try await Self.ours(cli, ["--state", "dataless"]).isEmpty)
        // A scope: one domain, one folder (the folder itself included, as find's start).
        #expect(
            try await Self.ours(cli, ["-name", "*.pdf"], ["remote"])
                == Self.subset(try await Self.gnuFind(replicas, ["-name", "*.pdf"]), "remote:/"))
        #expect(
            try await Self.ours(cli, [], ["loc:/dir one"]) == [
                "loc:/dir one", "loc:/dir one/inner.pdf", "loc:/dir one/deep", "loc:/dir one/deep/x.bin",
            ])
        #expect(
            try await Self.ours(cli, [], ["loc:/dir one"], page: 1) == [
                "loc:/dir one", "loc:/dir one/inner.pdf", "loc:/dir one/deep", "loc:/dir one/deep/x.bin",
            ])
    }

    static func subset(_ set: Set<String>, _ prefix: String) -> Set<String> { set.filter { $0.hasPrefix(prefix) } }

    @Test func statesJSONAndBadInput() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let store = temp.url.appendingPathComponent("store")
        try Self.write([("a/one.txt", 3, 0), ("a/two.txt", 4, 0), ("b/three.txt", 5, 0)], below: store)
        try await cli.addLocalDomain("d", root: store, options: ["--replica", temp.url.appendingPathComponent("d").path], sync: true)
        let pinned = try await cli.run(["pin", "d:/a"])
        #expect(pinned.status == 0, "\(pinned.stderr)")
        #expect(try await Self.ours(cli, ["-type", "f", "--state", "pinned"]) == ["d:/a/one.txt", "d:/a/two.txt"])
        #expect(try await Self.ours(cli, ["-type", "f", "--state", "downloaded"]) == ["d:/a/one.txt", "d:/a/two.txt"])
        #expect(try await Self.ours(cli, ["-type", "f", "--state", "dataless"]) == ["d:/b/three.txt"])
        // An edit no sync has sent.
        try Data("changed".utf8).write(to: temp.url.appendingPathComponent("d/a/one.txt"))
        #expect(try await Self.ours(cli, ["--state", "unsent"]) == ["d:/a/one.txt"])
        #expect(try await Self.ours(cli, ["--state", "unsent,dataless"]).isEmpty)
        let json = try await cli.json(["find", "-name", "one.txt", "--json"])
        let items = try #require(json as? [[String: Any]])
        #expect(items.count == 1)
        #expect(items.first?["location"] as? String == "d:/a/one.txt")
        #expect(items.first?["size"] as? Int == 3)
        #expect(items.first?["state"] as? String == "materialized")
        let none = try await cli.json(["find", "-name", "nothing", "--json"])
        #expect((none as? [Any])?.isEmpty == true)
        let badRegex = try await cli.run(["find", "-regex", "("])
        #expect(badRegex.status == 2 && badRegex.stderr.contains("regular expression"), "\(badRegex.stderr)")
        let badSize = try await cli.run(["find", "-size", "ten"])
        #expect(badSize.status == 2 && badSize.stderr.contains("-size"), "\(badSize.stderr)")
        let badState = try await cli.run(["find", "--state", "shiny"])
        #expect(badState.status == 2 && badState.stderr.contains("downloaded"), "\(badState.stderr)")
        let missing = try await cli.run(["find", "d:/nowhere"])
        #expect(missing.status != 0 && missing.stderr.contains("no item at"), "\(missing.stderr)")
    }
}
