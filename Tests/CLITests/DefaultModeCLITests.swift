import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `domain add` without `--mode`: dataless with `--on-access auto` (fanotify as root here, FUSE
/// for an ordinary user), and placeholder-files, saying why, where neither mechanism works (an
/// ordinary user in a container started without `/dev/fuse`). Adds domains only: nothing is
/// mounted.
@Suite("domain add without --mode", .serialized) struct DefaultModeCLITests {
    /// A temporary folder with a store folder `src` holding `a.txt`, and a runner whose home is in it.
    func prepared() throws -> (TemporaryFolder, CLIRunner, String) {
        let temp = try TemporaryFolder()
        try temp.write("src/a.txt", Data("a".utf8))
        return (temp, CLIRunner(in: temp), temp.url.appendingPathComponent("src").path)
    }

    /// The ordinary user the FUSE tests use too (made once, by whichever test runs first), its
    /// uid and gid.
    static func ordinaryUser() async throws -> (uid: uid_t, gid: gid_t) {
        try await offThePool { try TestUser.ensure() }
    }

    /// A folder `user` in a new temporary folder, owned by `owner`, holding the store `store`
    /// with `x.txt`; the temporary folder is kept while the test runs.
    static func userFolder(for owner: (uid: uid_t, gid: gid_t)) async throws -> (TemporaryFolder, String) {
        let temp = try TemporaryFolder()
        try #require(chmod(temp.url.path, 0o755) == 0)
        let root = temp.url.appendingPathComponent("user").path
        try FileManager.default.createDirectory(atPath: root + "/store", withIntermediateDirectories: true)
        try Data("x\n".utf8).write(to: URL(fileURLWithPath: root + "/store/x.txt"))
        let chowned = try await runProgram(["chown", "-R", "\(owner.uid):\(owner.gid)", root])
        try #require(chowned.succeeded, "\(chowned)")
        return (temp, root)
    }

    /// `fileproviderctl ARGUMENTS --home ROOT/home` as the ordinary user, without any
    /// capability; with `prefix`, inside that command (a namespace it makes).
    static func asUser(
        _ owner: (uid: uid_t, gid: gid_t), root: String, _ arguments: [String], prefix: [String] = []
    ) async throws -> ProgramRun {
        let user = ["/usr/bin/setpriv", "--reuid=\(owner.uid)", "--regid=\(owner.gid)", "--clear-groups", "--inh-caps=-all", "--"]
        return try await runProgram(
            prefix + user + ["env", "HOME=\(root)", CLIRunner.locateBinary().path, "--home", root + "/home"] + arguments, timeout: 120)
    }

    @Test func asRootADomainWithoutModeIsDatalessThroughFanotify() async throws {
        let (temp, cli, src) = try prepared()
        _ = temp
        let home = cli.home.path
        let added = try await cli.run(["domain", "add", "d", "--backend", "local", "--root", src])
        #expect(added.status == 0, "\(added.stderr)")
        let lines = added.stdout.split(separator: "\n").map(String.init)
        #expect(
            lines.first == "added domain 'd' (local, dataless); replica: \(home)/domains/d; files kept in: \(home)/replicas/d", "\(lines)")
        #expect(lines.contains { $0.hasPrefix("on access: fanotify: auto: fanotify pre-content events work here") }, "\(lines)")
        #expect(
            lines.contains(
                "serve must run (as root) for the replica to show files: 'fileproviderctl serve', or from boot on the system unit ('serve' as a system service in Docs/Install.md): 'systemctl enable --now fileproviderctl-serve'"
            ), "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("placeholder-files mode") }, "\(lines)")
        let shown = try #require(try await cli.json(["domain", "show", "d"]) as? [String: Any])
        #expect(shown["mode"] as? String == "dataless")
        #expect(shown["onAccess"] as? String == "fanotify")
        #expect(shown["modeReason"] as? String == "the default (no --mode)", "domain show repeats why: \(shown)")
        // A sync writes into the backing folder; the replica folder, a mount point for serve, stays empty.
        #expect(try await cli.run(["sync", "d"]).status == 0)
        #expect(FileManager.default.fileExists(atPath: "\(home)/replicas/d/a.txt"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(home)/domains/d").isEmpty)

        // --json says the mode, the mechanism and why.
        let json = try #require(
            try await cli.json([
                "domain", "add", "e", "--backend", "local", "--root", src, "--replica", temp.url.appendingPathComponent("e").path,
            ])
                as? [String: Any])
        #expect(json["mode"] as? String == "dataless")
        #expect(json["modeReason"] as? String == "the default (no --mode)")
        #expect(json["onAccess"] as? String == "fanotify")
        #expect((json["onAccessReason"] as? String)?.hasPrefix("auto: fanotify pre-content events work here") == true, "\(json)")
    }

    @Test func aModeOrAnOptionThatNeedsOneDecidesTheMode() async throws {
        let (temp, cli, src) = try prepared()
        func add(_ name: String, _ extra: [String]) async throws -> [String: Any] {
            let replica = temp.url.appendingPathComponent(name).path
            let result = try await cli.run(
                ["domain", "add", name, "--backend", "local", "--root", src, "--replica", replica, "--json"] + extra)
            #expect(result.status == 0, "\(extra): \(result.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        }
        let placeholders = try await add("p", ["--mode", "placeholder-files"])
        #expect(placeholders["mode"] as? String == "placeholder-files")
        #expect(placeholders["modeReason"] as? String == "asked for (--mode placeholder-files)")
        #expect(placeholders["onAccess"] == nil)
        let dataless = try await add("d", ["--mode", "dataless"])
        #expect(dataless["modeReason"] as? String == "asked for (--mode dataless)")
        // --on-access alone means dataless, through the mechanism asked for.
        let fuse = try await add("f", ["--on-access", "fuse"])
        #expect(fuse["mode"] as? String == "dataless")
        #expect(fuse["onAccess"] as? String == "fuse")
        #expect(fuse["onAccessReason"] as? String == "asked for (--on-access fuse)")
        // --adopt-replica alone means placeholder-files, the only mode it works in.
        try temp.write("kept/a.txt", Data("a".utf8))
        let adopted = try await add("kept", ["--adopt-replica"])
        #expect(adopted["mode"] as? String == "placeholder-files")
        #expect(adopted["modeReason"] as? String == "--adopt-replica (placeholder-files mode only)")
        #expect(adopted["adopted"] is [String: Any], "\(adopted)")

        let both = try await cli.run([
            "domain", "add", "x", "--backend", "local", "--root", src, "--mode", "placeholder-files", "--on-access", "fuse",
        ])
        #expect(both.status == 2)
        #expect(
            both.stderr
                == "error: --on-access chooses how programs reach a dataless domain's files: leave out --mode placeholder-files (--mode dataless is the default), or leave out --on-access\n"
        )
        let adoptingDataless = try await cli.run([
            "domain", "add", "y", "--backend", "local", "--root", src, "--adopt-replica", "--on-access", "fuse",
        ])
        #expect(adoptingDataless.status == 2)
        #expect(adoptingDataless.stderr.contains("--adopt-replica works in placeholder-files mode only"), "\(adoptingDataless.stderr)")
        #expect(try await cli.run(["domain", "show", "x"]).status != 0)
    }

    @Test func asAnOrdinaryUserADomainWithoutModeIsDatalessThroughFUSE() async throws {
        let owner = try await Self.ordinaryUser()
        // As distributions ship it (these machines have 0600).
        try #require(chmod("/dev/fuse", 0o666) == 0)
        let (temp, root) = try await Self.userFolder(for: owner)
        _ = temp
        let added = try await Self.asUser(
            owner, root: root, ["domain", "add", "d", "--backend", "local", "--root", root + "/store", "--replica", root + "/replica"])
        #expect(added.succeeded, "\(added)")
        let lines = String(decoding: added.output, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("added domain 'd' (local, dataless); replica: \(root)/replica; files kept in: ") == true, "\(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix("on access: fuse: auto: FUSE, as fanotify cannot work here (dataless mode needs CAP_SYS_ADMIN (root)")
            }, "\(lines)")
        #expect(
            lines.contains(
                "serve must run for the replica to show files: 'fileproviderctl serve', or from login on the systemd user unit that 'make install' installs: 'systemctl --user enable --now fileproviderctl-serve'"
            ), "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("limit:") || $0.hasPrefix("placeholder-files mode") }, "\(lines)")
        let shown = try await Self.asUser(owner, root: root, ["domain", "show", "d", "--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: shown.output) as? [String: Any])
        #expect(json["mode"] as? String == "dataless", "\(json)")
        #expect(json["onAccess"] as? String == "fuse", "\(json)")
    }

    /// An ordinary user in a container started without `/dev/fuse` (a new mount namespace whose
    /// `/dev` is a tmpfs holding what docker and podman put there): no root for fanotify, no
    /// device for FUSE.
    @Test func whereNeitherMechanismWorksADomainWithoutModeIsPlaceholderFilesAndSaysWhy() async throws {
        let owner = try await Self.ordinaryUser()
        let (temp, root) = try await Self.userFolder(for: owner)
        _ = temp
        let devices = [("null", 3), ("zero", 5), ("full", 7), ("random", 8), ("urandom", 9)]
        let container =
            "mount -t tmpfs -o mode=0755 tmpfs /dev && "
            + devices.map { "mknod -m 0666 /dev/\($0.0) c 1 \($0.1)" }.joined(separator: " && ")
            + " && ln -s /proc/self/fd /dev/fd && ln -s /proc/self/fd/0 /dev/stdin && ln -s /proc/self/fd/1 /dev/stdout"
            + " && ln -s /proc/self/fd/2 /dev/stderr && exec \"$@\""
        let inContainer = ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", container, "sh"]
        let store = root + "/store"

        let added = try await Self.asUser(
            owner, root: root, ["domain", "add", "d", "--backend", "local", "--root", store, "--replica", root + "/replica"],
            prefix: inContainer)
        #expect(added.succeeded, "\(added)")
        let lines = String(decoding: added.output, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first == "added domain 'd' (local); replica: \(root)/replica", "\(lines)")
        let said = lines.count == 3 ? lines[1] : ""
        for part in [
            "placeholder-files mode, as dataless files, the default (no --mode), cannot work here: not through fanotify (dataless mode needs CAP_SYS_ADMIN (root)",
            "not through FUSE (/dev/fuse does not exist: ",
            "(docker/podman: --device /dev/fuse)",
            "; once one of them works, 'fileproviderctl domain convert d --mode dataless' makes its files dataless",
        ] {
            #expect(said.contains(part), "\(part) not in: \(said)")
        }
        #expect(!said.contains("use --mode placeholder-files"), "\(said)")
        #expect(lines.last == "next: fileproviderctl sync d")

        // The domain works as any placeholder-files domain: a sync writes the placeholder.
        let synced = try await Self.asUser(owner, root: root, ["sync", "d"], prefix: inContainer)
        #expect(synced.succeeded, "\(synced)")
        #expect(FileManager.default.fileExists(atPath: root + "/replica/x.txt.placeholder"))

        // --json says the mode and why.
        let json = try await Self.asUser(
            owner, root: root, ["domain", "add", "e", "--backend", "local", "--root", store, "--replica", root + "/e", "--json"],
            prefix: inContainer)
        #expect(json.succeeded, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: json.output) as? [String: Any])
        #expect(object["mode"] as? String == "placeholder-files")
        #expect(object["onAccess"] == nil)
        let reason = object["modeReason"] as? String ?? ""
        #expect(reason.hasPrefix("dataless files, the default (no --mode), cannot work here: not through fanotify ("), "\(reason)")
        #expect(reason.contains("not through FUSE (/dev/fuse does not exist"), "\(reason)")
        // domain show keeps saying why, long after.
        let show = try await Self.asUser(owner, root: root, ["domain", "show", "e"], prefix: inContainer)
        #expect(String(decoding: show.output, as: UTF8.self).contains("mode:         placeholder-files (\(reason))"), "\(show)")

        // An explicit --mode dataless is refused, with both reasons, and nothing is added.
        let refused = try await Self.asUser(
            owner, root: root,
            ["domain", "add", "f", "--backend", "local", "--root", store, "--replica", root + "/f", "--mode", "dataless"],
            prefix: inContainer)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.errorText.contains("dataless files cannot work here: not through fanotify ("), "\(refused.errorText)")
        #expect(refused.errorText.contains("use --mode placeholder-files, which works anywhere without root"), "\(refused.errorText)")
        #expect(!FileManager.default.fileExists(atPath: root + "/f"))
    }
}
