import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The serving process is another program (the `fuse-folder-server` fixture): killed with
/// `kill -9`, readers get errors, never zeros, and no mount stays; run as an ordinary user, it
/// mounts through the setuid `fusermount3`; a mount with `allow_other` serves other users.
@Suite(.serialized) struct FUSEServerProcessTests {
    /// A running `fuse-folder-server`.
    struct Server {
        let pid: pid_t
        let log: String
    }

    /// Starts the server (as `user` when given: through `setpriv`, which execs it, so that its
    /// pid is the server's) on the lab's folders and waits until it says it is ready.
    static func startServer(_ lab: FUSELab, as user: String? = nil, extra: [String] = []) async throws -> Server {
        let log = lab.folder.path + "/server-\(UUID().uuidString.prefix(8)).out"
        let program = fixtureProgram("fuse-folder-server")
        let arguments = ["--backing", lab.backing, "--mount", lab.mount, "--name", "fuse-server-tests"] + extra
        let pid =
            if let user {
                try ChildProcess.spawn(
                    "/usr/bin/setpriv", OrdinaryUser.setprivArguments(user) + [program] + arguments, output: log, error: log)
            } else {
                try ChildProcess.spawn(program, arguments, output: log, error: log)
            }
        var said = ""
        let ready = await eventually(timeout: 60) {
            said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return said.contains("ready ") || said.contains("error ")
        }
        try #require(ready && said.contains("ready "), "fuse-folder-server did not get ready: \(said)")
        return Server(pid: pid, log: log)
    }

    static func reap(_ pid: pid_t) async throws -> Int32 {
        try await offThePool {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            return status
        }
    }

    @Test func killNineGivesReadersErrorsNeverZeros() async throws {
        let lab = try FUSELab()
        let bytes = FUSELab.bytes(32 << 20, seed: 11)  // 60 s to read: the kill always comes first
        try bytes.write(to: URL(fileURLWithPath: lab.source + "/slow.bin"))
        try bytes.write(to: URL(fileURLWithPath: lab.source + "/other.bin"))
        // A reader that writes what it read, then the errno its read failed with.
        let script = """
            import os, sys
            f = os.open(sys.argv[1], os.O_RDONLY)
            out = open(sys.argv[2], 'wb')
            print('opened', flush=True)
            try:
                while True:
                    b = os.read(f, 65536)
                    if not b: break
                    out.write(b); out.flush()
                print('end', flush=True)
            except OSError as e:
                print('errno', e.errno, flush=True)
            """
        // Five rounds on one folder: each new server mounts where the last one died (detaching
        // its mount when fusermount3 did not).
        for round in 1...5 {
            // 16 KiB chunks, 30 ms each: a reader is always waiting for the next chunk.
            let server = try await Self.startServer(
                lab,
                extra: [
                    "--dataless", "slow.bin=\(lab.source)/slow.bin", "--dataless", "other.bin=\(lab.source)/other.bin",
                    "--chunk", "16384", "--fetch-delay-us", "30000",
                ])
            let log = lab.folder.path + "/reader-\(round).out"
            let got = lab.folder.path + "/got-\(round).bin"
            let reader = try ChildProcess.spawn(
                "/usr/bin/env", ["python3", "-c", script, lab.mount + "/slow.bin", got], output: log, error: log)
            let reading = await eventually { (FileManager.default.contents(atPath: got)?.count ?? 0) > 100_000 }
            try #require(reading, "round \(round): the reader read nothing: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            kill(server.pid, SIGKILL)
            _ = try await Self.reap(server.pid)
            _ = try await Self.reap(reader)
            let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            let read = FileManager.default.contents(atPath: got) ?? Data()
            let failure = said.split(separator: "\n").first { $0.hasPrefix("errno") }.flatMap { Int32($0.split(separator: " ").last ?? "") }
            #expect(
                [ENOTCONN, EIO, ECONNABORTED].contains(failure ?? -1), "round \(round): the reader did not fail as it should: \(said)")
            #expect(
                read.count < bytes.count && read == bytes.prefix(read.count),
                "round \(round): the \(read.count) bytes read are not the file's")
            // A program that comes later gets an error too (or finds the folder unmounted, empty).
            let later = try await lab.shell("cat mount/other.bin > later.bin", expectSuccess: false)
            #expect(later.ending != .exited(0) || (FileManager.default.contents(atPath: lab.folder.path + "/later.bin")?.isEmpty ?? true))
            // fusermount3 (auto_unmount) removes the mount once the server is gone, or (it can
            // lose the race with the process's end) the mount is dead: ENOTCONN, never bytes.
            let settled = await eventually(timeout: 30) {
                // (Opening the folder asks the file system; a stat may come from the kernel's cache.)
                let probe = open(lab.mount, O_RDONLY | O_DIRECTORY)
                let dead = probe < 0 && errno == ENOTCONN
                if probe >= 0 { close(probe) }
                return dead || lab.mountInfo == nil
            }
            #expect(settled, "round \(round): the dead server's mount is neither gone nor dead: \(lab.mountInfo ?? "")")
        }
        // A new server mounts on the same folder and serves every byte.
        let again = try await Self.startServer(lab, extra: ["--dataless", "other.bin=\(lab.source)/other.bin"])
        try await lab.shell("cmp mount/other.bin source/other.bin")
        kill(again.pid, SIGTERM)
        #expect(try await Self.reap(again.pid) == 0)
        try await lab.stop()
    }

    /// A lab whose backing folder holds `file.txt` ("served"), with the dead mount of a server
    /// killed with `kill -9`: without auto_unmount nothing removes it.
    static func labWithADeadMount() async throws -> FUSELab {
        let lab = try FUSELab()
        try Data("served\n".utf8).write(to: URL(fileURLWithPath: lab.backing + "/file.txt"))
        let dead = try await startServer(lab, extra: ["--no-auto-unmount"])
        kill(dead.pid, SIGKILL)
        _ = try await reap(dead.pid)
        return lab
    }

    @Test func aDeadMountIsDetachedByTheNextMount() async throws {
        let lab = try await Self.labWithADeadMount()
        let failed = try await lab.shell("cat mount/file.txt", expectSuccess: false)
        #expect(String(decoding: failed.errorOutput, as: UTF8.self).contains("Transport endpoint is not connected"))
        #expect(lab.mountInfo != nil)
        // A mount of another kind is left alone, with what to do.
        var other = FUSEMountOptions(name: "other")
        other.subtype = "somethingelse"
        let options = other
        let fileSystem = lab.fileSystem
        let mount = lab.mount
        await #expect(throws: FileProviderError.self) {
            try await offThePool { try FUSESession.mount(fileSystem, at: mount, options: options) }
        }
        #expect(lab.mountInfo != nil)
        let again = try await Self.startServer(lab)
        #expect(try await lab.output("cat mount/file.txt") == "served\n")
        kill(again.pid, SIGTERM)
        #expect(try await Self.reap(again.pid) == 0)
        try await lab.stop()
    }

    /// The `fusermount3` of a mount whose process died looks at the mount, then unmounts the
    /// path: a new mount made in between (a server started again at once) was the one it took
    /// away, once in a loaded run (the folder was empty for the restarted `serve`). A stand-in
    /// named `fusermount3` with libfuse's arguments, which unmounts the path after 2 s, plays
    /// the late one: the next mount waits for it.
    @Test func aNewMountWaitsForTheFusermountOfADeadOne() async throws {
        let lab = try await Self.labWithADeadMount()
        let folder = lab.folder.path + "/late"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let late = folder + "/fusermount3"
        let unmount = "import ctypes, sys; ctypes.CDLL(None).umount2(sys.argv[1].encode(), 2)"
        try ExecutableScript.write("#!/bin/sh\nsleep 2\npython3 -c '\(unmount)' \"$4\"\n", to: late)
        let latePID = try ChildProcess.spawn(late, ["-o", "rw,auto_unmount", "--", lab.mount], output: "/dev/null", error: "/dev/null")
        let again = try await Self.startServer(lab)
        _ = try await Self.reap(latePID)
        #expect(lab.mountInfo != nil, "the new mount was taken away")
        let read = try await lab.shell("cat mount/file.txt", expectSuccess: false)
        #expect(String(decoding: read.output, as: UTF8.self) == "served\n", "\(read)")
        kill(again.pid, SIGTERM)
        #expect(try await Self.reap(again.pid) == 0)
        try await lab.stop()
    }

    @Test func anOrdinaryUserMountsThroughFusermount() async throws {
        let user = OrdinaryUser.name
        let uid = try await OrdinaryUser.ensure()
        let lab = try FUSELab()
        for path in [lab.source, lab.backing, lab.mount] { chown(path, uid, UInt32.max) }
        let original = "written by root into the backing folder\n"
        try Data((original + "through the user's mount\n").utf8).write(to: URL(fileURLWithPath: lab.backing + "/theirs.txt"))
        chown(lab.backing + "/theirs.txt", uid, UInt32.max)
        var device = stat()
        stat("/dev/fuse", &device)
        if device.st_mode & 0o006 != 0o006 {
            // As this machine ships it (0600): the user cannot mount, and is told what to do.
            let refused = lab.folder.path + "/refused.out"
            let pid = try ChildProcess.spawn(
                "/usr/sbin/runuser",
                ["-u", user, "--", fixtureProgram("fuse-folder-server"), "--backing", lab.backing, "--mount", lab.mount],
                output: refused, error: refused)
            _ = try await Self.reap(pid)
            let said = (try? String(contentsOfFile: refused, encoding: .utf8)) ?? ""
            #expect(said.contains("chmod 0666 /dev/fuse"), "the refusal said: \(said)")
        }
        try OrdinaryUser.openDevice()
        let server = try await Self.startServer(lab, as: user)
        let line = lab.mountInfo ?? ""
        #expect(line.contains(" fuse.fileprovider ") && line.contains("user_id=\(uid)"), "mountinfo: \(line)")
        #expect(try await lab.output("cat mount/theirs.txt", as: user) == original + "through the user's mount\n")
        try await lab.shell("echo written by the user > mount/new.txt && ls -l mount/new.txt >/dev/null", as: user)
        var written = stat()
        stat(lab.backing + "/new.txt", &written)
        #expect(written.st_uid == uid)
        // Without allow_other, even root is kept out of the user's mount.
        let root = try await lab.shell("cat mount/theirs.txt", expectSuccess: false)
        #expect(root.ending != .exited(0))
        kill(server.pid, SIGTERM)
        let status = try await Self.reap(server.pid)
        #expect(status == 0, "the server ended with status \(status)")
        #expect((try? String(contentsOfFile: server.log, encoding: .utf8))?.contains("unmounted") == true)
        #expect(lab.mountInfo == nil, "still mounted: \(lab.mountInfo ?? "")")
        try await lab.stop()
    }

    @Test func allowOtherServesAnotherUser() async throws {
        let user = OrdinaryUser.name
        _ = try await OrdinaryUser.ensure()
        try OrdinaryUser.openDevice()
        let lab = try FUSELab()
        try lab.addDataless("shared.bin", FUSELab.bytes(300_000, seed: 5))
        chmod(lab.backing + "/shared.bin", 0o644)
        chmod(lab.source + "/shared.bin", 0o644)
        try await lab.start { $0.allowOther = true }
        try await lab.shell("cmp mount/shared.bin source/shared.bin", as: user)
        // default_permissions: the kernel checks modes for the other user.
        try await lab.shell("echo secret > mount/private.txt && chmod 600 mount/private.txt")
        let denied = try await lab.shell("cat mount/private.txt", as: user, expectSuccess: false)
        #expect(denied.ending != .exited(0))
        #expect(String(decoding: denied.errorOutput, as: UTF8.self).contains("Permission denied"))
        try await lab.stop()
    }
}
