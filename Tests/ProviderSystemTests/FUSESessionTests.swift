import FUSEFolder
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What ``FUSESession`` asks of the kernel and tells it: its caches (a second read from the page
/// cache, invalidation when an item changes), large requests, bounded memory through forget,
/// who asks, clean unmounts, and mount failures that say what to do.
@Suite(.serialized) struct FUSESessionTests {
    @Test func aSecondReadOfACompleteFileComesFromThePageCache() async throws {
        let lab = try FUSELab()
        try FUSELab.bytes(8 << 20, seed: 3).write(to: URL(fileURLWithPath: lab.backing + "/complete.bin"))
        try await lab.start()
        try await lab.shell("cat mount/complete.bin | cmp - backing/complete.bin")
        let first = lab.fileSystem.statistics
        #expect(first.completeOpens >= 1)
        // FOPEN_KEEP_CACHE: a later cat opens the file but the kernel reads none of it again.
        // (The kernel may still drop pages of a clean file under memory pressure, as on a CI
        // machine running every suite at once: one more cat is allowed to read, the next not.)
        var before = first
        var extra: [Int] = []
        for _ in 1...3 {
            try await lab.shell("cat mount/complete.bin | cmp - backing/complete.bin")
            let after = lab.fileSystem.statistics
            extra.append(after.reads - before.reads)
            before = after
            if extra.last == 0 { break }
        }
        #expect(before.fetches == 0)
        #expect(extra.last == 0, "each later cat made read requests: \(extra)")
        // 1 MiB requests (max_pages) for a program that reads 4 MiB at once: the kernel sends
        // 128 KiB without it.
        try FUSELab.bytes(8 << 20, seed: 4).write(to: URL(fileURLWithPath: lab.backing + "/large.bin"))
        try await lab.shell("dd if=mount/large.bin bs=4M iflag=direct status=none | cmp - backing/large.bin")
        let largest = lab.fileSystem.statistics.largestRead
        #expect(largest == 1 << 20, "the largest read request was \(largest) bytes")
        try await lab.stop()
    }

    @Test func keptCachesAreDroppedWhenTheFileSystemSaysSo() async throws {
        let lab = try FUSELab()
        try Data("old contents\n".utf8).write(to: URL(fileURLWithPath: lab.backing + "/same.txt"))
        try Data("old contents\n".utf8).write(to: URL(fileURLWithPath: lab.backing + "/item.txt"))
        try Data("x".utf8).write(to: URL(fileURLWithPath: lab.backing + "/gone.txt"))
        try await lab.start()
        let session = try #require(lab.session)
        #expect(try await lab.output("cat mount/same.txt mount/item.txt") == "old contents\nold contents\n")
        try await lab.shell("stat mount/gone.txt >/dev/null")
        let same = UInt64(try await lab.output("stat -c %i mount/same.txt").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        // A sync changes items behind the kernel's back (as the engine writes the backing
        // folder): the kernel's long-lived caches still show the old items...
        try Data("NEW contents\n".utf8).write(to: URL(fileURLWithPath: lab.backing + "/same.txt"))
        try Data("new contents, longer\n".utf8).write(to: URL(fileURLWithPath: lab.backing + "/item.txt"))
        unlink(lab.backing + "/gone.txt")
        #expect(try await lab.output("cat mount/same.txt") == "old contents\n")
        #expect(try await lab.output("stat -c %s mount/item.txt") == "13\n")
        try await lab.shell("stat mount/gone.txt >/dev/null")
        // ...until the file system invalidates them: an inode's cached pages...
        try await offThePool { try session.invalidate(inode: same) }
        #expect(try await lab.output("cat mount/same.txt") == "NEW contents\n")
        // ...a name whose item was replaced (a new generation: the kernel makes a new inode and
        // takes its size, which it keeps itself for cached files under the writeback cache)...
        try #require(lab.fileSystem.replacedBehindTheKernel(FUSEName("item.txt"), in: 1) != nil)
        try await offThePool { try session.invalidate(entry: FUSEName("item.txt"), in: 1) }
        #expect(try await lab.output("stat -c %s mount/item.txt") == "21\n")
        #expect(try await lab.output("cat mount/item.txt") == "new contents, longer\n")
        // ...and a name that is gone.
        try await offThePool { try session.invalidate(entry: FUSEName("gone.txt"), in: 1) }
        let gone = try await lab.shell("stat mount/gone.txt", expectSuccess: false)
        #expect(gone.ending == .exited(1))
        // Invalidating what the kernel does not hold is no error.
        try await offThePool {
            try session.invalidate(inode: 987_654)
            try session.invalidate(entry: FUSEName("never-seen"), in: 1)
        }
        try await lab.stop()
    }

    @Test func aReadOfMissingBytesFailsWhenTheStoreIsDown() async throws {
        let lab = try FUSELab()
        let bytes = FUSELab.bytes(500_000, seed: 21)
        try lab.addDataless("remote.bin", bytes)
        try bytes.write(to: URL(fileURLWithPath: lab.backing + "/local.bin"))
        try await lab.start()
        try await lab.shell("head -c 1000 mount/remote.bin | cmp -n 1000 - source/remote.bin")
        lab.fileSystem.storeDown.store(true, ordering: .sequentiallyConsistent)
        // The bytes already fetched still read; the missing ones fail with EIO, never zeros.
        try await lab.shell("head -c 1000 mount/remote.bin | cmp -n 1000 - source/remote.bin")
        let failed = try await lab.shell("cat mount/remote.bin > got.bin", expectSuccess: false)
        #expect(failed.ending != .exited(0))
        #expect(String(decoding: failed.errorOutput, as: UTF8.self).contains("Input/output error"))
        let got = FileManager.default.contents(atPath: lab.folder.path + "/got.bin") ?? Data()
        #expect(got.count < bytes.count && got == bytes.prefix(got.count), "cat wrote \(got.count) bytes that are not the file's")
        // A complete file reads whole.
        try await lab.shell("cmp mount/local.bin source/remote.bin")
        lab.fileSystem.storeDown.store(false, ordering: .sequentiallyConsistent)
        try await lab.shell("cmp mount/remote.bin source/remote.bin")
        try await lab.stop()
    }

    @Test func theKernelForgetsInodesAndTheTableShrinks() async throws {
        let lab = try FUSELab()
        for folder in 0..<10 {
            let path = lab.backing + "/f\(folder)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            for index in 0..<200 { try Data("\(index)".utf8).write(to: URL(fileURLWithPath: path + "/i\(index)")) }
        }
        try await lab.start()
        #expect(try await lab.output("ls -lR mount | grep -c '^-'") == "2000\n")
        let listed = lab.fileSystem.statistics.nodes
        #expect(listed >= 2000, "a listing with attributes gave the kernel \(listed) inodes")
        // Dropping the kernel's dentry and inode caches makes it forget them all.
        try await lab.shell("sync && echo 2 > /proc/sys/vm/drop_caches")
        let shrunk = await eventually(timeout: 30) {
            if lab.fileSystem.statistics.nodes < 100 { return true }
            _ = try? await lab.shell("echo 2 > /proc/sys/vm/drop_caches")
            return false
        }
        #expect(shrunk, "after drop_caches the file system still keeps \(lab.fileSystem.statistics.nodes) inodes")
        #expect(try await lab.output("cat mount/f3/i7") == "7")
        try await lab.stop()
    }

    @Test func eachRequestSaysWhichProgramAsks() async throws {
        let lab = try FUSELab()
        try lab.addDataless("asked.bin", FUSELab.bytes(100_000))
        try await lab.start()
        let output = lab.folder.path + "/cat.out"
        let pid = try ChildProcess.spawn("/bin/cat", [lab.mount + "/asked.bin"], output: output, error: output)
        let status = try await offThePool {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            return status
        }
        #expect(status == 0)
        #expect(lab.fileSystem.statistics.requesters.contains(pid), "requesters \(lab.fileSystem.statistics.requesters), cat was \(pid)")
        try await lab.stop()
    }

    @Test func unmountWhileAProgramHoldsAFileLeavesNoMount() async throws {
        let lab = try FUSELab()
        try FUSELab.bytes(10_000).write(to: URL(fileURLWithPath: lab.backing + "/held.bin"))
        try await lab.start()
        #expect(lab.mountInfo?.contains(" fuse.fileprovider ") == true, "mountinfo: \(lab.mountInfo ?? "no line")")
        #expect(lab.mountInfo?.contains(" fuse-tests ") == true)
        let go = lab.folder.path + "/go"
        let script = """
            import os, sys, time
            f = open(sys.argv[1], 'rb')
            print('opened', flush=True)
            while not os.path.exists(sys.argv[2]): time.sleep(0.01)
            try:
                f.seek(0); data = f.read()
                print('read', len(data), flush=True)
            except OSError as e:
                print('error', e.errno, flush=True)
            """
        let log = lab.folder.path + "/holder.out"
        let holder = try ChildProcess.spawn(
            "/usr/bin/env", ["python3", "-c", script, lab.mount + "/held.bin", go], output: log, error: log)
        let opened = await eventually { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("opened") }
        try #require(opened)
        let session = try #require(lab.session)
        try await offThePool { session.unmount() }
        #expect(lab.mountInfo == nil, "still mounted: \(lab.mountInfo ?? "")")
        _ = FileManager.default.createFile(atPath: go, contents: nil)
        _ = try await offThePool {
            var status: Int32 = 0
            while waitpid(holder, &status, 0) == -1 && errno == EINTR {}
            return status
        }
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        // The kernel may still have the bytes cached (read 10000, the file's) or fail the read;
        // never another length.
        #expect(said.contains("read 10000") || said.contains("error"), "the holder said: \(said)")
        try await lab.stop()
    }

    @Test func anUnmountBySomeoneElseEndsTheSession() async throws {
        let lab = try FUSELab()
        try await lab.start()
        let session = try #require(lab.session)
        #expect(session.isServing)
        try await lab.shell("fusermount3 -u mount")
        try await offThePool { session.waitUntilEnded() }
        #expect(!session.isServing)
        #expect(lab.mountInfo == nil)
        // The folder can be mounted again at once, by a new session.
        try await lab.start()
        try await lab.shell("touch mount/again && [ -e backing/again ]")
        try await offThePool { session.unmount() }
        try await lab.stop()
    }

    @Test func mountFailuresSayWhatToDo() async throws {
        let lab = try FUSELab()
        let options = FUSEMountOptions(name: "failures")
        let fileSystem = lab.fileSystem
        func failure(_ path: String) async -> FileProviderError? {
            do {
                let session = try await offThePool { try FUSESession.mount(fileSystem, at: path, options: options) }
                try? await offThePool { session.unmount() }
                return nil
            } catch let error as FileProviderError {
                return error
            } catch {
                return nil
            }
        }
        let missing = await failure(lab.folder.path + "/no-such-folder")
        #expect(missing?.code == .noSuchItem && missing?.message.contains("create it first") == true, "\(String(describing: missing))")
        try Data("x".utf8).write(to: URL(fileURLWithPath: lab.folder.path + "/a-file"))
        let notFolder = await failure(lab.folder.path + "/a-file")
        #expect(notFolder?.code == .invalidArgument && notFolder?.message.contains("not a folder") == true)
        // (Never the backing folder itself: the file system would read its files through its
        // own mount and wait on itself.)
        let other = lab.folder.path + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let notEmpty = await failure(other)
        try Data("x".utf8).write(to: URL(fileURLWithPath: other + "/keep"))
        let reallyNotEmpty = await failure(other)
        #expect(notEmpty == nil, "an empty folder mounts: \(String(describing: notEmpty))")
        #expect(
            reallyNotEmpty?.code == .invalidArgument && reallyNotEmpty?.message.contains("not empty (it holds keep)") == true,
            "\(String(describing: reallyNotEmpty))")
        try await lab.start()
        let mounted = await failure(lab.mount)
        #expect(mounted?.message.contains("mount point already") == true, "\(String(describing: mounted))")
        #expect(throws: FileProviderError.self) { try FUSEMountCheck.checkDevice(lab.folder.path + "/no-fuse-device") }
        do {
            try FUSEMountCheck.checkDevice(lab.folder.path + "/no-fuse-device")
        } catch {
            #expect(error.code == .notSupported && error.message.contains("modprobe fuse"), "\(error)")
        }
        try await lab.stop()
    }
}
