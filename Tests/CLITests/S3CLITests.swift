import Foundation
import ProviderTesting
import Testing

/// An `s3` domain through the CLI against a SeaweedFS cluster on 127.0.0.1 (one master, two
/// volume servers with replication 001, a filer, the S3 gateway): `domain add --backend s3`
/// with the keys in the AWS variables, sync, materialize, an edit uploaded, a rename, a
/// deletion, a folder's rename, each checked in the bucket with curl.
@Suite("CLI s3 domain against SeaweedFS")
struct S3CLITests {
    static let startup = Task { try await offThePool { try SeaweedFSCluster() } }

    @Test func addSyncMaterializeEditRenameDelete() async throws {
        let cluster = try await Self.startup.value
        let bucket = try await offThePool { try cluster.makeBucket() }
        try await offThePool {
            try cluster.putObject(bucket: bucket, key: "team/docs/hello.txt", Data("hello from the bucket\n".utf8))
            try cluster.putObject(bucket: bucket, key: "elsewhere.txt", Data("outside the prefix\n".utf8))
        }
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let replica = temp.url.appendingPathComponent("replica")
        let environment = [
            "AWS_ACCESS_KEY_ID": cluster.accessKey, "AWS_SECRET_ACCESS_KEY": cluster.secretKey, "AWS_SESSION_TOKEN": "",
            "AWS_PROFILE": "", "HOME": temp.url.path,
        ]

        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "bucket", "--backend", "s3", "--endpoint", cluster.endpoint, "--bucket",
                bucket, "--prefix", "team",
                "--path-style", "--replica", replica.path,
            ], environment: environment)
        #expect(added.status == 0, "domain add: \(added.stderr)")
        for file in try FileManager.default.contentsOfDirectory(atPath: cli.home.path) where file.hasPrefix("metadata.sqlite") {
            let data = try Data(contentsOf: cli.home.appendingPathComponent(file))
            #expect(data.range(of: Data(cluster.secretKey.utf8)) == nil, "the secret key is in \(file)")
        }

        // -vv: a line per request, naming the signature, never showing the keys.
        let synced = try await cli.run(["sync", "-vv", "bucket"], environment: environment)
        #expect(synced.status == 0, "sync: \(synced.stderr)")
        #expect(synced.stderr.contains("auth=aws-sigv4"), "\(synced.stderr.prefix(2000))")
        #expect(!synced.stderr.contains(cluster.secretKey))
        let materialized = try await cli.run(["materialize", "bucket:/docs/hello.txt"], environment: environment)
        #expect(materialized.status == 0, "materialize: \(materialized.stderr)")
        let hello = replica.appendingPathComponent("docs/hello.txt")
        #expect((try? String(contentsOf: hello, encoding: .utf8)) == "hello from the bucket\n")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("elsewhere.txt").path))

        // An edit and a new folder with a file go up.
        try Data("edited in the replica\n".utf8).write(to: hello)
        try FileManager.default.createDirectory(at: replica.appendingPathComponent("new folder"), withIntermediateDirectories: true)
        try Data("new\n".utf8).write(to: replica.appendingPathComponent("new folder/n.txt"))
        let up = try await cli.run(["sync", "bucket"], environment: environment)
        #expect(up.status == 0, "sync up: \(up.stderr)")
        #expect(
            try await offThePool { try cluster.getObject(bucket: bucket, key: "team/docs/hello.txt") }
                == Data("edited in the replica\n".utf8))
        #expect(try await offThePool { try cluster.getObject(bucket: bucket, key: "team/new folder/n.txt") } == Data("new\n".utf8))

        // A rename is a copy and a deletion in the bucket.
        try FileManager.default.moveItem(at: hello, to: replica.appendingPathComponent("docs/renamed.txt"))
        let renamed = try await cli.run(["sync", "bucket"], environment: environment)
        #expect(renamed.status == 0, "sync after the rename: \(renamed.stderr)")
        #expect(
            try await offThePool { try cluster.getObject(bucket: bucket, key: "team/docs/renamed.txt") }
                == Data("edited in the replica\n".utf8))
        #expect(try await offThePool { try cluster.getObject(bucket: bucket, key: "team/docs/hello.txt") } == nil)

        // A deletion.
        try FileManager.default.removeItem(at: replica.appendingPathComponent("new folder/n.txt"))
        let deleted = try await cli.run(["sync", "bucket"], environment: environment)
        #expect(deleted.status == 0, "sync after the deletion: \(deleted.stderr)")
        #expect(try await offThePool { try cluster.getObject(bucket: bucket, key: "team/new folder/n.txt") } == nil)

        // A change made in the bucket comes down.
        try await offThePool { try cluster.putObject(bucket: bucket, key: "team/docs/renamed.txt", Data("changed in the bucket\n".utf8)) }
        let down = try await cli.run(["sync", "bucket"], environment: environment)
        #expect(down.status == 0, "sync down: \(down.stderr)")
        #expect(
            (try? String(contentsOf: replica.appendingPathComponent("docs/renamed.txt"), encoding: .utf8)) == "changed in the bucket\n")

        // A folder's rename copies every key below it and deletes the old ones.
        try FileManager.default.moveItem(at: replica.appendingPathComponent("docs"), to: replica.appendingPathComponent("papers"))
        let movedFolder = try await cli.run(["sync", "bucket"], environment: environment)
        #expect(movedFolder.status == 0, "sync after the folder's rename: \(movedFolder.stderr)")
        #expect(
            try await offThePool { try cluster.getObject(bucket: bucket, key: "team/papers/renamed.txt") }
                == Data("changed in the bucket\n".utf8))
        #expect(try await offThePool { try cluster.getObject(bucket: bucket, key: "team/docs/renamed.txt") } == nil)
        let again = try await cli.run(["sync", "bucket"], environment: environment)
        #expect(again.status == 0, "sync after that: \(again.stderr)")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("docs").path))
        #expect(
            (try? String(contentsOf: replica.appendingPathComponent("papers/renamed.txt"), encoding: .utf8)) == "changed in the bucket\n")
    }

    /// A sync of a bucket with `--flat-listing` lists it at once (spooled on disk) and finds
    /// exactly what the folder-by-folder walk (the default) finds, awkward key orders included
    /// (`a-c` and `a.d` sort between `a` and `a/…`); a second sync changes nothing.
    @Test func aFlatListingFindsWhatTheFolderWalkFinds() async throws {
        let cluster = try await Self.startup.value
        let bucket = try await offThePool { try cluster.makeBucket() }
        var keys = ["a-c", "a.d", "a0", "a/b", "a/x/deep.txt", "a/x/y/z/deeper.txt", "empty/", "marked/", "marked/inside.txt"]
        for top in 0..<3 {
            for middle in 0..<3 { keys += ["t\(top)/m\(middle)/one.txt", "t\(top)/m\(middle)/two.bin", "t\(top)/file-\(middle).txt"] }
        }
        try await offThePool { [keys] in
            for key in keys { try cluster.putObject(bucket: bucket, key: "root/" + key, Data(key.hasSuffix("/") ? [] : Array(key.utf8))) }
        }
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = [
            "AWS_ACCESS_KEY_ID": cluster.accessKey, "AWS_SECRET_ACCESS_KEY": cluster.secretKey, "AWS_SESSION_TOKEN": "",
            "AWS_PROFILE": "", "HOME": temp.url.path,
        ]
        var replicas: [String: [String]] = [:]
        for (name, extra) in [("flat", ["--flat-listing"]), ("walked", [String]())] {
            let replica = temp.url.appendingPathComponent(name)
            let added = try await cli.run(
                [
                    "domain", "add", "--mode", "placeholder-files", name, "--backend", "s3", "--endpoint", cluster.endpoint, "--bucket",
                    bucket, "--prefix", "root",
                    "--path-style", "--replica", replica.path,
                ] + extra, environment: environment)
            #expect(added.status == 0, "domain add: \(added.stderr)")
            let synced = try #require(try await cli.json(["sync", name], environment: environment) as? [String: Any])
            let report = try #require((synced["reports"] as? [[String: Any]])?.first)
            #expect((report["flatListingPages"] as? Int ?? 0 > 0) == (name == "flat"), "\(name): \(report)")
            replicas[name] = try FileManager.default.subpathsOfDirectory(atPath: replica.path).sorted()
            let again = try #require(try await cli.json(["sync", name], environment: environment) as? [String: Any])
            let second = try #require((again["reports"] as? [[String: Any]])?.first)
            for key in ["added", "updated", "moved", "deleted"] { #expect(second[key] as? Int == 0, "\(name): a second sync had \(key)") }
        }
        #expect(replicas["flat"] == replicas["walked"])
        #expect(replicas["flat"]?.contains("a/x/y/z/deeper.txt.placeholder") == true, "\(replicas["flat"] ?? [])")
        #expect(replicas["flat"]?.contains("empty") == true)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: cli.home.appendingPathComponent("staging").path).filter {
                $0.hasPrefix("listing-spool-")
            }.isEmpty)
    }

    @Test func wrongKeysAreRefusedWithTheReason() async throws {
        let cluster = try await Self.startup.value
        let bucket = try await offThePool { try cluster.makeBucket() }
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = [
            "AWS_ACCESS_KEY_ID": cluster.accessKey, "AWS_SECRET_ACCESS_KEY": "not-the-secret", "AWS_PROFILE": "", "HOME": temp.url.path,
        ]
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "bad", "--backend", "s3", "--endpoint", cluster.endpoint, "--bucket",
                bucket, "--path-style",
                "--replica", temp.url.appendingPathComponent("replica").path,
            ], environment: environment)
        #expect(added.status != 0)
        #expect(added.stderr.contains("SignatureDoesNotMatch"), "\(added.stderr)")
        #expect(added.stderr.contains("from the environment"), "\(added.stderr)")

        let missing = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "missing", "--backend", "s3", "--endpoint", cluster.endpoint, "--bucket",
                "no-such-bucket-here",
                "--path-style", "--replica", temp.url.appendingPathComponent("replica2").path,
            ], environment: ["AWS_ACCESS_KEY_ID": cluster.accessKey, "AWS_SECRET_ACCESS_KEY": cluster.secretKey, "HOME": temp.url.path])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("--bucket"), "\(missing.stderr)")
    }

    @Test func aProfileOfTheAWSFilesGivesTheKeys() async throws {
        let cluster = try await Self.startup.value
        let bucket = try await offThePool { try cluster.makeBucket() }
        try await offThePool { try cluster.putObject(bucket: bucket, key: "a.txt", Data("a\n".utf8)) }
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write(
            ".aws/credentials",
            Data(
                "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[seaweed]\naws_access_key_id = \(cluster.accessKey)\naws_secret_access_key = \(cluster.secretKey)\n"
                    .utf8))
        try temp.write(".aws/config", Data("[profile seaweed]\nregion = \(cluster.region)\n".utf8))
        let environment = ["HOME": temp.url.path, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": ""]
        let replica = temp.url.appendingPathComponent("replica")
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "prof", "--backend", "s3", "--endpoint", cluster.endpoint, "--bucket",
                bucket, "--path-style",
                "--profile", "seaweed", "--replica", replica.path,
            ], environment: environment)
        #expect(added.status == 0, "domain add: \(added.stderr)")
        let synced = try await cli.run(["sync", "prof"], environment: environment)
        #expect(synced.status == 0, "sync: \(synced.stderr)")
        let listed = try await cli.run(["ls", "prof:/"], environment: environment)
        #expect(listed.stdout.contains("a.txt"), "ls: \(listed.stdout) \(listed.stderr)")
    }
}
