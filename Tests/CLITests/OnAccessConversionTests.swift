import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `domain convert NAME --on-access fanotify|fuse|auto` (issue #38), through the real binary,
/// `serve` and programs that are not ours: a dataless domain moves between FUSE and fanotify
/// and back without losing a byte (a downloaded file, an edited file not sent yet, files never
/// downloaded), each `serve` after a conversion mounts the other mechanism and `cat` reads the
/// right bytes, and a sync sends exactly the edit; and the refusals (a placeholder-files domain,
/// a served domain, fanotify for an ordinary user). Mounts FUSE: in the Makefile's second
/// `swift test` process.
@Suite("On-access conversion", .serialized, .timeLimit(.minutes(10)))
struct OnAccessConversionTests {
    /// The store's files: one downloaded before the conversions, one edited in the replica, and
    /// one never read per round (so each round reads a file never downloaded).
    static let downloaded = patterned(200_000, seed: 501)
    static let storeEdit = Data("the store's version\n".utf8)
    static func never(_ round: Int) -> Data { patterned(300_000 + round * 4099, seed: UInt64(510 + round)) }

    /// The mount type at `path` in this process's mount table (`fuse.fileprovider`, `ext4`), or `nil`.
    func mountType(_ path: String) -> String? {
        guard let table = readProcFile("/proc/self/mountinfo") else { return nil }
        let line = table.split(separator: "\n").last { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && fields[4] == path
        }
        guard let fields = line?.split(separator: " "), let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { return nil }
        return String(fields[dash + 1])
    }

    /// `sync --json` of the domain: its one report.
    func sync(_ domain: ServedDomain) async throws -> [String: Any] {
        let result = try #require(try await domain.cli.json(["sync", domain.name]) as? [String: Any])
        let reports = try #require(result["reports"] as? [[String: Any]], "\(result)")
        return try #require(reports.first, "\(result)")
    }

    /// The `ls --json` state of a file of the domain.
    func state(_ domain: ServedDomain, _ path: String) async throws -> String? {
        let listed = try #require(try await domain.cli.json(["ls", "\(domain.name):/\(path)"]) as? [[String: Any]])
        return listed.first?["state"] as? String
    }

    @Test func aDatalessDomainMovesFromFUSEToFanotifyAndBackWithoutLosingAByte() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        var files = ["downloaded.bin": Self.downloaded, "edited.txt": Self.storeEdit]
        for round in 0..<3 { files["never\(round).bin"] = Self.never(round) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files, layout: .fuse)
        let materialized = try await domain.cli.run(["materialize", "d:/downloaded.bin", "d:/edited.txt"])
        try #require(materialized.status == 0, "\(materialized.stderr)")

        // Served through FUSE first, then killed: a conversion after a serve that died finds the
        // replica folder free (a dead FUSE mount is detached).
        try await domain.startServe()
        #expect(mountType(domain.replica) == "fuse.fileprovider")
        let first = try await runProgram(["cat", domain.replica + "/downloaded.bin"])
        #expect(first.output == Self.downloaded, "\(first)")
        try await domain.killServe()

        for (round, target) in [(0, "fanotify"), (1, "fuse")] {
            let from = target == "fanotify" ? "fuse" : "fanotify"
            // An edit that no sync has sent, written where the engine keeps the files.
            let edit = Data("edited before the conversion to \(target)\n".utf8)
            try edit.write(to: URL(fileURLWithPath: domain.backing + "/edited.txt"))

            let report = try #require(
                try await domain.cli.json(["domain", "convert", "d", "--on-access", target]) as? [String: Any])
            #expect(report["from"] as? String == "dataless" && report["to"] as? String == "dataless", "\(report)")
            #expect(report["onAccessFrom"] as? String == from && report["onAccessTo"] as? String == target, "\(report)")
            #expect(report["unchanged"] as? Bool == false && report["movedEntries"] as? Int == 0, "\(report)")
            #expect((report["onAccessReason"] as? String)?.contains("--on-access \(target)") == true, "\(report)")
            let shown = try #require(try await domain.cli.json(["domain", "show", "d"]) as? [String: Any])
            #expect(shown["onAccess"] as? String == target && shown["mode"] as? String == "dataless", "\(shown)")
            #expect(try await state(domain, "downloaded.bin") == "materialized")
            #expect(try await state(domain, "never\(round).bin") == "placeholder")

            // The sync sends the edit and nothing else; nothing is downloaded.
            let sent = try await sync(domain)
            #expect(sent["uploaded"] as? Int == 1 && sent["downloaded"] as? Int == 0, "round \(round): \(sent)")
            #expect(sent["conflicts"] as? Int == 0, "\(sent)")
            #expect(domain.stored("edited.txt") == edit)
            #expect(domain.stored("downloaded.bin") == Self.downloaded && domain.stored("never\(round).bin") == Self.never(round))

            // serve mounts the new mechanism; cat reads the right bytes of all three.
            try await domain.startServe()
            #expect(
                (mountType(domain.replica) == "fuse.fileprovider") == (target == "fuse"),
                "round \(round): \(String(describing: mountType(domain.replica)))")
            for (path, expected) in [("downloaded.bin", Self.downloaded), ("edited.txt", edit), ("never\(round).bin", Self.never(round))] {
                let read = try await runProgram(["cat", domain.replica + "/" + path])
                #expect(read.succeeded && read.output == expected, "round \(round), \(path) through \(target): \(read)")
            }
            try await domain.stopServe()
            let after = try await sync(domain)
            #expect(after["uploaded"] as? Int == 0 && after["downloaded"] as? Int == 0, "round \(round): \(after)")
            #expect(try await state(domain, "never\(round + 1).bin") == "placeholder", "a file nobody read stays not downloaded")
        }
        #expect(domain.stored("never2.bin") == Self.never(2))

        // On the mechanism already: left as it is, and said so.
        let again = try await domain.cli.run(["domain", "convert", "d", "--on-access", "fuse"])
        #expect(again.status == 0 && again.stdout == "domain 'd' is on fuse already (dataless mode); nothing was changed\n", "\(again)")
        let text = try await domain.cli.run(["domain", "convert", "d", "--mode", "dataless", "--on-access", "fanotify"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(
            text.stdout.hasPrefix(
                "converted domain 'd' from fuse to fanotify: no file moved (both keep the files in \(domain.backing) in one form)\n"),
            "\(text.stdout)")
        #expect(text.stdout.contains("on access: fanotify: asked for (--on-access fanotify)\n"), "\(text.stdout)")
        await store.stop()
    }

    /// What a FUSE `serve` leaves when `fusermount3` loses the race with its end (FUSE.md): a
    /// dead mount of our subtype on the replica folder, every access `ENOTCONN`. Made here with
    /// the `fuse-folder-server` fixture mounted without `auto_unmount` and killed: the conversion
    /// detaches it, and fanotify's `serve` mounts there.
    @Test func aDeadFUSEMountOnTheReplicaFolderIsDetachedByTheConversion() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options,
            files: ["a.txt": Data("served by fanotify now\n".utf8)], layout: .fuse)
        let empty = temp.url.appendingPathComponent("empty").path
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let log = temp.url.appendingPathComponent("fuse-folder-server.out").path
        let program = CLIRunner.locateBinary().deletingLastPathComponent().appendingPathComponent("fuse-folder-server").path
        let pid = try ChildProcess.spawn(
            program, ["--backing", empty, "--mount", domain.replica, "--no-auto-unmount"], output: log, error: log)
        let ready = await waitUntil(timeout: 60) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("ready ")
        }
        if !ready { kill(pid, SIGKILL) }
        try #require(ready, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        kill(pid, SIGKILL)
        _ = try await offThePool {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            return status
        }
        var status = stat()
        let probe = lstat(domain.replica + "/probe", &status) == 0 ? 0 : errno
        #expect(probe == ENOTCONN && isMountPoint(domain.replica), "not a dead mount: \(String(cString: strerror(probe)))")

        let converted = try await domain.cli.run(["domain", "convert", "d", "--on-access", "fanotify"])
        #expect(converted.status == 0, "\(converted.stderr)")
        #expect(!isMountPoint(domain.replica), "the dead mount is still there")
        try await domain.startServe()
        #expect(mountType(domain.replica) != "fuse.fileprovider")
        let read = try await runProgram(["cat", domain.replica + "/a.txt"])
        #expect(read.succeeded && read.output == Data("served by fanotify now\n".utf8), "\(read)")
        try await domain.stopServe()
        await store.stop()
    }

    @Test func aPlaceholderFilesDomainConvertsToFUSEOnlyWithModeDataless() async throws {
        let temp = try TemporaryFolder()
        try temp.write("src/a.txt", Data("a\n".utf8))
        try temp.write("src/sub/cold.bin", patterned(70_000, seed: 520))
        let cli = CLIRunner(in: temp)
        let src = temp.url.appendingPathComponent("src")
        try await cli.addLocalDomain("p", root: src, sync: true)
        let replica = cli.home.appendingPathComponent("domains/p").path

        for arguments in [["--on-access", "fuse"], ["--mode", "placeholder-files", "--on-access", "fuse"], []] {
            let refused = try await cli.run(["domain", "convert", "p"] + arguments)
            #expect(refused.status == 2, "\(arguments): \(refused)")
            #expect(refused.stderr.contains("--mode dataless") || refused.stderr.contains("--on-access"), "\(arguments): \(refused.stderr)")
        }
        #expect(FileManager.default.fileExists(atPath: replica + "/a.txt.placeholder"))

        let report = try #require(
            try await cli.json(["domain", "convert", "p", "--mode", "dataless", "--on-access", "fuse"]) as? [String: Any])
        #expect(report["from"] as? String == "placeholder-files" && report["to"] as? String == "dataless", "\(report)")
        #expect(report["onAccessFrom"] == nil && report["onAccessTo"] as? String == "fuse", "\(report)")
        let shown = try #require(try await cli.json(["domain", "show", "p"]) as? [String: Any])
        #expect(shown["onAccess"] as? String == "fuse", "\(shown)")

        // serve mounts it through FUSE; a file that was a .placeholder reads the store's bytes.
        let serve = try ServeProcess(cli, ["p", "--poll-interval", "60"], log: temp.url.appendingPathComponent("serve.log"))
        let mounted = await waitUntil(timeout: 30) { isMountPoint(replica) || !serve.process.isRunning }
        try #require(mounted && serve.process.isRunning, "\(serve.output)")
        #expect(mountType(replica) == "fuse.fileprovider")
        let read = try await runProgram(["cat", replica + "/sub/cold.bin"])
        #expect(read.succeeded && read.output == patterned(70_000, seed: 520), "\(read)")

        // Refused while serve serves it, and nothing changes.
        let refused = try await cli.run(["domain", "convert", "p", "--on-access", "fanotify"])
        #expect(refused.status == 1 && refused.stderr.contains("stop 'fileproviderctl serve' first"), "\(refused)")
        #expect((try await cli.json(["domain", "show", "p"]) as? [String: Any])?["onAccess"] as? String == "fuse")
        #expect(await serve.stop(SIGTERM, timeout: 30) == 0, "\(serve.output)")
        #expect(!isMountPoint(replica))
        let converted = try await cli.run(["domain", "convert", "p", "--on-access", "fanotify"])
        #expect(converted.status == 0, "\(converted.stderr)")
    }

    /// An ordinary user has no CAP_SYS_ADMIN: fanotify is refused with the reason, `auto`
    /// keeps FUSE, and nothing changes.
    @Test func fanotifyIsRefusedWithTheReasonForAnOrdinaryUser() async throws {
        let (uid, gid) = try await offThePool { try TestUser.ensure() }
        // As distributions ship it (these machines have 0600): domain add checks FUSE.
        try #require(chmod("/dev/fuse", 0o666) == 0)
        let temp = try TemporaryFolder()
        try #require(chmod(temp.url.path, 0o755) == 0)
        let root = temp.url.appendingPathComponent("user").path
        try FileManager.default.createDirectory(atPath: root + "/store", withIntermediateDirectories: true)
        try Data("x\n".utf8).write(to: URL(fileURLWithPath: root + "/store/x.txt"))
        let chowned = try await runProgram(["chown", "-R", "\(uid):\(gid)", root])
        try #require(chowned.succeeded, "\(chowned)")
        let asUser = ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--inh-caps=-all", "--"]
        func ctl(_ arguments: [String]) async throws -> ProgramRun {
            try await runProgram(
                asUser + ["env", "HOME=\(root)", CLIRunner.locateBinary().path, "--home", root + "/home"] + arguments, timeout: 120)
        }
        let added = try await ctl([
            "domain", "add", "d", "--backend", "local", "--root", root + "/store", "--mode", "dataless", "--replica", root + "/replica",
        ])
        try #require(added.succeeded, "\(added)")
        let refused = try await ctl(["domain", "convert", "d", "--on-access", "fanotify"])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.errorText.contains("CAP_SYS_ADMIN") && refused.errorText.contains("nothing was changed"), "\(refused.errorText)")
        let auto = try await ctl(["domain", "convert", "d", "--on-access", "auto"])
        #expect(auto.succeeded, "\(auto)")
        #expect(String(decoding: auto.output, as: UTF8.self) == "domain 'd' is on fuse already (dataless mode); nothing was changed\n")
        let shown = try await ctl(["domain", "show", "d", "--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: shown.output) as? [String: Any])
        #expect(json["onAccess"] as? String == "fuse", "\(json)")
    }
}
