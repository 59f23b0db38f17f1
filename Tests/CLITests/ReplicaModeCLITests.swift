import Foundation
import Testing

/// `domain add --mode`, and the mode in `domain show`, `domain list` and `status`, through the
/// real binary. CI runs as root on ext4, where a dataless domain can be added.
@Suite struct ReplicaModeCLITests {

    /// A temporary folder with a store folder `src` holding `a.txt`, and a runner whose home is in it.
    func prepared() throws -> (TemporaryFolder, CLIRunner, String) {
        let temp = try TemporaryFolder()
        try temp.write("src/a.txt", Data("a".utf8))
        return (temp, CLIRunner(in: temp), temp.url.appendingPathComponent("src").path)
    }

    /// The default, dataless, is in `DefaultModeCLITests`.
    @Test func placeholderFilesIsAskedForAndAnUnknownModeIsAUsageError() async throws {
        let (temp, cli, src) = try prepared()
        _ = temp
        #expect(try await cli.run(["domain", "add", "--mode", "placeholder-files", "p", "--backend", "local", "--root", src]).status == 0)
        let shown = try #require(try await cli.json(["domain", "show", "p"]) as? [String: Any])
        #expect(shown["mode"] as? String == "placeholder-files")
        #expect(shown["backing"] == nil)
        // An unknown mode is a usage error.
        let bogus = try await cli.run(["domain", "add", "q", "--backend", "local", "--root", src, "--mode", "fuse"])
        #expect(bogus.status == 2)
        #expect(bogus.stderr.contains("placeholder-files"), "\(bogus.stderr)")
    }

    @Test func aDatalessDomainIsAddedAndShowsItsModeAndBackingFolder() async throws {
        let (temp, cli, src) = try prepared()
        _ = temp
        let home = cli.home.path
        let added = try await cli.run(
            ["domain", "add", "d", "--backend", "local", "--root", src, "--mode", "dataless"])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(
            added.stdout
                == "added domain 'd' (local, dataless); replica: \(home)/domains/d; files kept in: \(home)/replicas/d\non access: fanotify: auto: fanotify pre-content events work here (CAP_SYS_ADMIN, Linux 6.14 or later, a file system that takes the mark)\nlimit: programs that map holes before reading (SEEK_DATA/SEEK_HOLE, FIEMAP; not tar, which is given whole files) skip what is not downloaded and get zeros instead of its bytes; run 'fileproviderctl materialize -R d:/' before such a backup\nserve must run (as root) for the replica to show files: 'fileproviderctl serve', or from boot on the system unit ('serve' as a system service in Docs/Install.md): 'systemctl enable --now fileproviderctl-serve'\nnext: fileproviderctl sync d\n"
        )
        #expect(try await cli.run(["domain", "add", "--mode", "placeholder-files", "p", "--backend", "local", "--root", src]).status == 0)
        #expect(FileManager.default.fileExists(atPath: "\(home)/replicas/d"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(home)/domains/d").isEmpty)

        let shown = try #require(try await cli.json(["domain", "show", "d"]) as? [String: Any])
        #expect(shown["mode"] as? String == "dataless")
        #expect(shown["replica"] as? String == "\(home)/domains/d")
        #expect(shown["backing"] as? String == "\(home)/replicas/d")
        let text = try await cli.run(["domain", "show", "d"]).stdout
        #expect(
            text.contains(
                "\nreplica:      \(home)/domains/d\nmode:         dataless (asked for (--mode dataless))\nbacking:      \(home)/replicas/d\n"
            ),
            "\(text)")
        let placeholders = try await cli.run(["domain", "show", "p"]).stdout
        #expect(
            placeholders.contains("\nmode:         placeholder-files (asked for (--mode placeholder-files))\ncreated:"), "\(placeholders)")

        let list = try await cli.run(["domain", "list"]).stdout.split(separator: "\n").map {
            $0.split(separator: "\t", omittingEmptySubsequences: false)
        }
        #expect(list.first == ["NAME", "BACKEND", "MODE", "ITEMS", "LAST SYNC", "REPLICA", "BACKING"])
        #expect(
            list.dropFirst().map { [$0[0], $0[2], $0[5], $0[6]] } == [
                ["d", "dataless", "\(home)/domains/d", "\(home)/replicas/d"], ["p", "placeholder-files", "\(home)/domains/p", "-"],
            ])
        let listed = try #require(try await cli.json(["domain", "list"]) as? [[String: Any]])
        #expect(listed.map { $0["mode"] as? String } == ["dataless", "placeholder-files"])

        let status = try await cli.run(["status"]).stdout.split(separator: "\n").map(String.init)
        #expect(status.count == 3, "\(status)")
        #expect(status[0].hasPrefix("d (local, dataless): "))
        #expect(status[1] == "  files kept in \(home)/replicas/d")
        #expect(status[2].hasPrefix("p (local, placeholder-files): "))
        let statusJSON = try #require(try await cli.json(["status"]) as? [[String: Any]])
        #expect(statusJSON.map { $0["backing"] as? String } == ["\(home)/replicas/d", nil])

        // A sync writes into the backing folder; the replica folder stays empty.
        #expect(try await cli.run(["sync", "d"]).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(home)/domains/d").isEmpty)
        #expect(try !FileManager.default.contentsOfDirectory(atPath: "\(home)/replicas/d").isEmpty)
    }

    @Test func removingADatalessDomainKeepingItsFilesSaysWhereTheyAre() async throws {
        let (temp, cli, src) = try prepared()
        _ = temp
        let home = cli.home.path
        #expect(
            try await cli.run(["domain", "add", "d", "--backend", "local", "--root", src, "--mode", "dataless"])
                .status == 0)
        #expect(try await cli.run(["sync", "d"]).status == 0)
        #expect(try await cli.run(["materialize", "d:/a.txt"]).status == 0)
        try Data("new here".utf8).write(to: URL(fileURLWithPath: "\(home)/replicas/d/new.txt"))
        // The new file in the backing folder is work the store does not have.
        let refused = try await cli.run(["domain", "remove", "d"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("/new.txt"), "\(refused.stderr)")
        let removed = try await cli.run(["domain", "remove", "d", "--keep-replica"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout == "removed domain 'd'; kept \(home)/replicas/d\n")
        #expect(removed.stderr.contains("what is in \(home)/replicas/d stays there"), "\(removed.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(home)/replicas/d/a.txt")) == Data("a".utf8))
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(home)/replicas/d/new.txt")) == Data("new here".utf8))
        #expect(!FileManager.default.fileExists(atPath: "\(home)/domains/d"))
    }

    @Test func helpExplainsBothModes() async throws {
        let (temp, cli, _) = try prepared()
        _ = temp
        let help = try await cli.run(["domain", "add", "--help"], withHome: false)
        #expect(help.status == 0)
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains("--mode <mode>"))
        #expect(text.contains("placeholder-files A file that is not downloaded is a small <name>.placeholder file"), "\(text)")
        #expect(text.contains("works anywhere, without root and without 'serve'"))
        #expect(
            text.contains(
                "dataless (the default) Every file is under its real name and is fetched when any program reads, writes or runs it"),
            "\(text)")
        #expect(text.contains("run it from login on with the systemd user unit, 'systemctl --user enable --now fileproviderctl-serve'"))
        #expect(text.contains("the domain is added in placeholder-files mode instead, and a line says why and how to get dataless files"))
        #expect(
            text.contains(
                "fanotify fanotify pre-content events: complete files at native speed; needs root (CAP_SYS_ADMIN), Linux 6.14 or later and a state folder on ext4, xfs, btrfs or bcachefs"
            ), "\(text)")
        #expect(text.contains("fuse a FUSE mount (libfuse 3, fusermount3): any user, any kernel with FUSE, no holes"), "\(text)")
        #expect(text.contains("auto (the default) fanotify where it can work, else fuse"), "\(text)")
        #expect(text.contains("without it the replica folder is empty; the files are kept in <home>/replicas/<name>"))
    }
}
