import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Files on access (`dataless` mode) through the real `fileproviderctl serve`, the real kernel
/// (fanotify pre-content events; CI runs as root on ext4) and programs that are not ours.
@Suite("On-access files", .serialized, .timeLimit(.minutes(10)))
struct OnAccessTests {
    /// The store of a test: its folder and the backend options for it, and what to stop.
    final class StoreUnderTest {
        let folder: String
        let backend: String
        let options: [String: String]
        let ssh: SSHServer?
        let media: MediaServer?

        /// `mediaArguments`: more arguments for a media-server (`--verbose` logs its requests).
        init(_ kind: ServedDomain.Store, temp: TemporaryFolder, mediaArguments: [String] = []) async throws {
            switch kind {
            case .local:
                folder = temp.url.appendingPathComponent("store").path
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                (backend, options, ssh, media) = ("local", ["root": folder], nil, nil)
            case .sftp:
                let server = try await SSHServer.started()
                let root = try server.makeFolder()
                folder = root
                (backend, options, ssh, media) = ("sftp", server.options(root: root), server, nil)
            case .media:
                let server = try await offThePool { try MediaServer(arguments: mediaArguments) }
                let name = try server.makeFolder()
                folder = server.root.appendingPathComponent(name).path
                (backend, options, ssh, media) = ("media", ["url": server.url, "root": name], nil, server)
            }
        }

        func stop() async {
            await ssh?.stopped()
            ssh?.removeFiles()
            media?.stop()
        }
    }

    /// One file per reader, so each program meets a file that was never downloaded.
    static let readers: [(name: String, command: @Sendable (String) -> [String])] = [
        ("cat", { ["cat", $0] }),
        ("cp", { ["sh", "-c", "cp \"$0\" /dev/stdout", $0] }),
        ("python3 read", { ["python3", "-c", "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", $0] }),
        (
            "python3 mmap",
            {
                [
                    "python3", "-c",
                    "import mmap, sys\nwith open(sys.argv[1], 'rb') as f:\n    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n    sys.stdout.buffer.write(m[:])",
                    $0,
                ]
            }
        ),
        ("dd", { ["dd", "if=\($0)", "bs=65536", "status=none"] }),
    ]

    @Test(arguments: ServedDomain.Store.allCases)
    func programsThatAreNotOursReadEveryByteOfFilesNeverDownloaded(_ kind: ServedDomain.Store) async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(kind, temp: temp)
        var files: [String: Data] = [:]
        for (index, reader) in Self.readers.enumerated() {
            files["r\(index).bin"] = patterned(300_000 + index * 4099, seed: UInt64(index + 1))
            _ = reader
        }
        files["sub/ü name.bin"] = patterned(1_234_567, seed: 90)
        files["sums/a.bin"] = patterned(70_001, seed: 91)
        files["tail.bin"] = patterned(50_000, seed: 92)
        files["cmp.bin"] = patterned(123_457, seed: 93)
        files["copy.bin"] = patterned(5_000_000, seed: 94)
        files["empty.txt"] = Data()
        files["tool.sh"] = Data("#!/bin/sh\necho ran from the store\n".utf8)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        try await domain.startServe()

        // Before any read: the real size and date, no blocks.
        for (path, contents) in files {
            let status = try #require(fileStatus(domain.replica + "/" + path), "\(path) is not in the replica")
            #expect(Int(status.st_size) == contents.count, "\(path)")
            // At most one block: zeros that make the file not look all holes (see below).
            #expect(status.st_blocks <= 8, "\(path) has \(status.st_blocks) blocks before it was read")
        }
        for (index, reader) in Self.readers.enumerated() {
            let path = domain.replica + "/r\(index).bin"
            let run = try await runProgram(reader.command(path))
            #expect(run.succeeded, "\(reader.name): \(run)")
            #expect(run.output == files["r\(index).bin"], "\(reader.name) read \(run.output.count) bytes that differ")
        }
        let cmp = try await runProgram(["cmp", domain.replica + "/cmp.bin", store.folder + "/cmp.bin"])
        #expect(cmp.succeeded, "cmp: \(cmp)")
        let tail = try await runProgram(["tail", "-c", "10", domain.replica + "/tail.bin"])
        #expect(tail.output == files["tail.bin"]!.suffix(10), "tail: \(tail)")
        let sum = try await runProgram(["sha256sum", domain.replica + "/sub/ü name.bin", domain.replica + "/sums/a.bin"])
        let expected = try await runProgram(["sha256sum", store.folder + "/sub/ü name.bin", store.folder + "/sums/a.bin"])
        #expect(sum.succeeded && expected.succeeded)
        let hashes = { (run: ProgramRun) in
            String(decoding: run.output, as: UTF8.self).split(separator: "\n").map { $0.split(separator: " ").first ?? "" }
        }
        #expect(hashes(sum) == hashes(expected), "\(sum) vs \(expected)")
        // cp skips what lseek(SEEK_DATA) calls holes: it must read (and so fetch) the file.
        let copy = temp.url.appendingPathComponent("copy.bin").path
        let copied = try await runProgram(["cp", domain.replica + "/copy.bin", copy])
        #expect(copied.succeeded, "cp: \(copied)")
        #expect(FileManager.default.contents(atPath: copy) == files["copy.bin"], "cp copied bytes that are not the store's")
        // exec: the kernel reads the script to run it (the store keeps no modes: chmod first).
        let executed = try await runProgram(["sh", "-c", "chmod +x \"$0\" && \"$0\"", domain.replica + "/tool.sh"])
        #expect(executed.succeeded && executed.output == Data("ran from the store\n".utf8), "exec: \(executed)")
        let empty = try await runProgram(["cat", domain.replica + "/empty.txt"])
        #expect(empty.succeeded && empty.output.isEmpty, "\(empty)")

        // Each file was fetched once, and is recorded as downloaded.
        for index in Self.readers.indices { #expect(await domain.fetches(of: "r\(index).bin", reaching: 1) == 1, "\(domain.logs)") }
        let listing = try #require(try await domain.cli.json(["ls", "-R", "d:/"]) as? [[String: Any]])
        let states = Dictionary(listing.compactMap { item in (item["path"] as? String).map { ($0, item["state"] as? String ?? "") } }) {
            a, _ in a
        }
        #expect(states["/r0.bin"] == "materialized", "\(states)")
        // The engine reads its backing folder: a second read needs no event round trip to fetch.
        let again = try await runProgram(["cat", domain.replica + "/r0.bin"])
        #expect(again.output == files["r0.bin"])
        #expect(await domain.fetches(of: "r0.bin", reaching: 1) == 1)
        try await domain.stopServe()
        await store.stop()
    }

    @Test func appendTruncateAndRenameOverSaveEndInTheStoreWithoutConflicts() async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.local, temp: temp)
        let files = [
            "append.txt": Data("first line\n".utf8), "truncate.txt": Data(repeating: 0x41, count: 100_000),
            "editor.txt": Data("old text\n".utf8), "python.txt": Data("0123456789".utf8),
        ]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        try await domain.startServe(["--settle", "0.2"])
        let replica = domain.replica

        let append = try await runProgram(["sh", "-c", "echo 'second line' >> \"$0\"", replica + "/append.txt"])
        #expect(append.succeeded, "\(append)")
        let truncate = try await runProgram(["sh", "-c", "printf 'short' > \"$0\"", replica + "/truncate.txt"])
        #expect(truncate.succeeded, "\(truncate)")
        // An editor: reads the file, writes a new one beside it, renames it over.
        let editor = try await runProgram([
            "python3", "-c",
            "import os, sys\np = sys.argv[1]\nold = open(p).read()\nopen(p + '.swp', 'w').write(old.replace('old', 'new'))\nos.rename(p + '.swp', p)",
            replica + "/editor.txt",
        ])
        #expect(editor.succeeded, "\(editor)")
        // Read-modify-write in place at an offset.
        let python = try await runProgram([
            "python3", "-c", "import sys\nf = open(sys.argv[1], 'r+b')\nf.seek(4)\nf.write(b'XY')\nf.close()", replica + "/python.txt",
        ])
        #expect(python.succeeded, "\(python)")
        #expect(domain.logs.contains("truncate.txt emptied by process"), "\(domain.logs)")

        let expected = [
            "append.txt": Data("first line\nsecond line\n".utf8), "truncate.txt": Data("short".utf8),
            "editor.txt": Data("new text\n".utf8), "python.txt": Data("0123XY6789".utf8),
        ]
        let arrived = await waitUntil(timeout: 60) { expected.allSatisfy { domain.stored($0.key) == $0.value } }
        #expect(
            arrived,
            "the store has \(expected.keys.map { "\($0): \(domain.stored($0).map { String(decoding: $0, as: UTF8.self) } ?? "-")" })")
        let names = try FileManager.default.contentsOfDirectory(atPath: store.folder).sorted()
        #expect(names == expected.keys.sorted(), "\(names)")
        let conflicts = try await domain.cli.run(["conflicts", "d"])
        #expect(!conflicts.stdout.contains("conflicted"), "\(conflicts.stdout)")
        try await domain.stopServe()
        await store.stop()
    }

    /// Where two byte strings first differ, how far, and whether `read` holds zeros there.
    static func difference(_ read: Data, _ expected: Data) -> String {
        let a = [UInt8](read)
        let b = [UInt8](expected)
        let common = 0..<min(a.count, b.count)
        guard let first = common.first(where: { a[$0] != b[$0] }) ?? (a.count == b.count ? nil : common.upperBound) else {
            return "no difference"
        }
        let last = common.last(where: { a[$0] != b[$0] }) ?? first
        let zeros = first < a.count && a[first...min(last, a.count - 1)].allSatisfy { $0 == 0 }
        return "bytes \(first)...\(last) differ\(zeros ? ", zeros there" : "")"
    }

    @Test func killNineWhileProgramsReadNeverShowsAByteThatIsNotTheStores() async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.local, temp: temp)
        var files: [String: Data] = [:]
        for index in 0..<4 { files["f\(index).bin"] = patterned(3_000_000 + index * 65_537, seed: UInt64(100 + index)) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        var generator = CrashTests.Generator(state: UInt64(Date().timeIntervalSince1970))
        var outcomes: [String: Int] = [:]
        let rounds = 20
        for round in 0..<rounds {
            // Every file dataless again.
            let evicted = try await domain.cli.run(["evict", "-R", "d:/"])
            #expect(evicted.status == 0, "round \(round): \(evicted.stderr)")
            try await domain.startServe()
            let replica = domain.replica
            let readers = files.keys.sorted().map { name in
                Task { (name, try await runProgram(["cat", replica + "/" + name], timeout: 60)) }
            }
            let pause = UInt64.random(in: 0...60, using: &generator)
            try await Task.sleep(nanoseconds: pause * 1_000_000)  // a random moment to kill at, not a synchronization
            try await domain.killServe()
            for reader in readers {
                let (name, run) = try await reader.value
                #expect(!run.timedOut, "round \(round): \(name) hung: \(run)")
                if run.succeeded {
                    #expect(
                        run.output == files[name],
                        "round \(round): \(name): \(run.output.count) bytes that are not the store's: \(Self.difference(run.output, files[name] ?? Data())); serve's logs end:\n\(domain.logs.suffix(3000))"
                    )
                    outcomes["read right", default: 0] += 1
                } else {
                    // Failed (EIO) or unreachable (no such file): never wrong bytes.
                    #expect(
                        run.output.isEmpty || files[name]!.starts(with: run.output), "round \(round): \(name): wrong bytes before failing")
                    outcomes[run.errorText.contains("Input/output error") ? "EIO" : "unreachable", default: 0] += 1
                }
            }
        }
        // After a restart everything reads right.
        try await domain.startServe()
        for (name, contents) in files {
            let run = try await runProgram(["cat", domain.replica + "/" + name])
            #expect(run.succeeded && run.output == contents, "after restart: \(name): \(run)")
        }
        try await domain.stopServe()
        print("on-access kill -9: \(rounds) rounds, outcomes \(outcomes.sorted { $0.key < $1.key })")
        await store.stop()
    }

    @Test func aStoreThatIsDownFailsTheReadWithEIOAndTheNextReadAfterItIsBackWorks() async throws {
        try await Self.aStoreThatIsDownFailsTheReadWithEIO(.fanotify)
    }

    /// The body of ``aStoreThatIsDownFailsTheReadWithEIOAndTheNextReadAfterItIsBackWorks()``,
    /// for each layout (`FUSEReplicaTests` runs it through FUSE).
    static func aStoreThatIsDownFailsTheReadWithEIO(_ layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.sftp, temp: temp)
        let contents = patterned(200_000, seed: 7)
        let kept = patterned(300_000, seed: 17)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options,
            files: ["doc.bin": contents, "kept.bin": kept], layout: layout)
        try await domain.startServe()
        // Read once while the store is up: downloaded, it reads while the store is down.
        let before = try await runProgram(["cat", domain.replica + "/kept.bin"], timeout: 120)
        #expect(before.succeeded && before.output == kept, "\(before)")
        let ssh = try #require(store.ssh)
        await ssh.stopped()
        let offline = try await runProgram(["cat", domain.replica + "/kept.bin"], timeout: 60)
        #expect(offline.succeeded && offline.output == kept, "a downloaded file while the store is down: \(offline)")

        let started = Date()
        let failed = try await runProgram(["cat", domain.replica + "/doc.bin"], timeout: 120)
        let seconds = Date().timeIntervalSince(started)
        #expect(!failed.succeeded && failed.output.isEmpty, "\(failed)")
        #expect(failed.errorText.contains("Input/output error"), "\(failed)")
        #expect(seconds < 60, "the read took \(seconds) s to fail")
        let why = try await domain.cli.run(["why", "d:/doc.bin"])
        #expect(why.stdout.contains("fetch on access failed"), "\(why.stdout)")
        // Still dataless (the leading block, and at most one block of attributes: the status),
        // and it says so to every program: `error`, through the replica path.
        let status = try #require(fileStatus(domain.backing + "/doc.bin"))
        #expect(status.st_blocks <= 16 && Int(status.st_size) == contents.count, "the file is no longer dataless after a failure")
        #expect(
            try await StatusAttributeTests.attribute("user.fileprovider.dataless", of: domain.backing + "/doc.bin") != nil,
            "the file lost its dataless mark after a failure")
        #expect(try await StatusAttributeTests.status(domain.replica + "/doc.bin") == "error")
        #expect(try await StatusAttributeTests.status(domain.replica + "/kept.bin") == "downloaded")

        try await ssh.restarted()
        let read = try await runProgram(["cat", domain.replica + "/doc.bin"], timeout: 120)
        #expect(read.succeeded && read.output == contents, "\(read)")
        let downloaded = try await waitUntil(timeout: 30) {
            try await StatusAttributeTests.status(domain.replica + "/doc.bin") == "downloaded"
        }
        #expect(downloaded, "the status after a fetch that worked")
        try await domain.stopServe()
        await store.stop()
    }

    @Test func evictionGivesTheBlocksBackAndTheNextReadFetchesAgainPinnedAndEditedFilesRefuse() async throws {
        try await Self.evictionGivesTheBlocksBack(.fanotify)
    }

    /// The body of ``evictionGivesTheBlocksBackAndTheNextReadFetchesAgainPinnedAndEditedFilesRefuse()``,
    /// for each layout.
    static func evictionGivesTheBlocksBack(_ layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.local, temp: temp)
        let files = [
            "a.bin": patterned(2_000_000, seed: 1), "pinned.bin": patterned(10_000, seed: 2), "edited.txt": Data("v1\n".utf8),
        ]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files, layout: layout)
        try await domain.startServe(["--settle", "30"])
        let first = try await runProgram(["cat", domain.replica + "/a.bin"])
        #expect(first.output == files["a.bin"])
        #expect((fileStatus(domain.backing + "/a.bin")?.st_blocks ?? 0) >= 2_000_000 / 512)

        let evicted = try await domain.cli.run(["evict", domain.replica + "/a.bin"])
        #expect(evicted.status == 0, "\(evicted.stderr)")
        // Through FUSE the kernel learns of the eviction at serve's next sync (its watcher sees
        // the backing folder change): attributes it cached are dropped then.
        let given = await waitUntil(timeout: 30) { (fileStatus(domain.replica + "/a.bin")?.st_blocks ?? 0) <= 8 }
        let status = try #require(fileStatus(domain.replica + "/a.bin"))
        #expect(given && status.st_size == 2_000_000, "blocks \(status.st_blocks), size \(status.st_size)")
        // The store changes meanwhile: the next read fetches the new contents.
        let changed = patterned(2_000_000, seed: 3)
        try domain.write("a.bin", changed)
        #expect(try await domain.cli.run(["signal", "d"]).status == 0)
        let refreshed = await waitUntil(timeout: 30) {
            (try? await domain.cli.json(["ls", "d:/"]) as? [[String: Any]])?.contains {
                ($0["path"] as? String) == "/a.bin" && ($0["state"] as? String) == "placeholder"
            } == true
                && domain.logs.contains("1 updated")
        }
        #expect(refreshed, "\(domain.logs)")
        let second = try await runProgram(["cat", domain.replica + "/a.bin"])
        #expect(second.output == changed, "the second read got \(second.output.count) bytes that are not the store's new contents")
        #expect(await domain.fetches(of: "a.bin", reaching: 2) == 2, "\(domain.logs)")

        // Pinned and edited files refuse.
        let pin = try await domain.cli.run(["pin", "d:/pinned.bin"])
        #expect(pin.status == 0, "\(pin.stderr)")
        let pinned = try await domain.cli.run(["evict", "d:/pinned.bin"])
        #expect(pinned.status != 0 && pinned.stderr.contains("pinned"), "\(pinned.stderr)")
        #expect((fileStatus(domain.backing + "/pinned.bin")?.st_blocks ?? 0) > 0)
        let edit = try await runProgram(["sh", "-c", "echo v2 >> \"$0\"", domain.replica + "/edited.txt"])
        #expect(edit.succeeded)
        // serve sends a file closed after writing at once: refused while the edit is unsent, or
        // evicted once the store has it; the edit is never lost.
        let edited = try await domain.cli.run(["evict", "d:/edited.txt"])
        if edited.status != 0 {
            #expect(edited.stderr.contains("edit") || edited.stderr.contains("changes"), "\(edited.stderr)")
            #expect(FileManager.default.contents(atPath: domain.backing + "/edited.txt") == Data("v1\nv2\n".utf8))
        } else {
            #expect(FileManager.default.contents(atPath: store.folder + "/edited.txt") == Data("v1\nv2\n".utf8), "\(domain.logs)")
        }
        try await domain.stopServe()
        await store.stop()
    }

    @Test func aServedDatalessDomainIsNotRemovedUntilServeStops() async throws {
        try await Self.aServedDomainIsNotRemoved(.fanotify)
    }

    /// The body of ``aServedDatalessDomainIsNotRemovedUntilServeStops()``, for each layout.
    static func aServedDomainIsNotRemoved(_ layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.local, temp: temp)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: ["a.txt": Data("a".utf8)],
            layout: layout)
        try await domain.startServe()
        let refused = try await domain.cli.run(["domain", "remove", "d"])
        #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("is served by process"), "\(refused.stderr)")
        #expect(refused.stderr.contains("stop that serve first"), "\(refused.stderr)")
        #expect(isMountPoint(domain.replica))
        #expect(FileManager.default.fileExists(atPath: domain.backing + "/a.txt"))
        try await domain.stopServe()
        let removed = try await domain.cli.run(["domain", "remove", "d"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: domain.backing))
        await store.stop()
    }

    @Test func aFileMovedAndReadBeforeTheNextSyncIsFetchedFromItsNewPlace() async throws {
        try await Self.aFileMovedAndReadIsFetched(.fanotify)
    }

    /// The body of ``aFileMovedAndReadBeforeTheNextSyncIsFetchedFromItsNewPlace()``, for each layout.
    static func aFileMovedAndReadIsFetched(_ layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.local, temp: temp)
        let contents = patterned(100_000, seed: 8)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options,
            files: ["a/report.bin": contents, "b/keep.txt": Data("k".utf8)], layout: layout)
        try await domain.startServe()
        let moved = try await runProgram([
            "sh", "-c", "mv \"$0/a/report.bin\" \"$0/b/renamed.bin\" && cat \"$0/b/renamed.bin\"", domain.replica,
        ])
        #expect(moved.succeeded, "\(moved)")
        #expect(moved.output == contents, "read \(moved.output.count) bytes that are not the file's")
        let arrived = await waitUntil(timeout: 30) { domain.stored("b/renamed.bin") == contents && domain.stored("a/report.bin") == nil }
        #expect(arrived, "the move did not reach the store: \(domain.logs.suffix(2000))")
        try await domain.stopServe()
        await store.stop()
    }

    /// The `fileprovider-guard` child of the process `pid`.
    static func guardian(of pid: Int32) -> Int32? {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            let children = (readProcFile("/proc/\(pid)/task/\(task)/children") ?? "").split(separator: " ").compactMap { Int32($0) }
            for child in children where (readProcFile("/proc/\(child)/comm") ?? "").hasPrefix("fileprovider-gu") { return child }
        }
        return nil
    }

    /// `serve` and its guardian killed together (what `systemctl kill -s KILL` does to a unit, or
    /// an OOM kill of a whole cgroup): nobody answers any more and the kernel dropped the marks
    /// with the group, so the mount left behind would show files never downloaded as zeros. A
    /// reader waiting at that moment is the window Reliability.md names (its bytes are not
    /// checked here). Any command detaches the mount first thing (`domain check-mounts` says
    /// so); a later reader finds nothing, never zeros, and the next `serve` serves every byte.
    /// So does the next `serve` before it mounts, and any other command (`ls`), with a warning.
    /// The guardian runs with `oom_score_adj` -1000, and a live `serve`'s mount is left alone.
    @Test func serveAndItsGuardianKilledTogetherLeaveNoMountToReadZerosThrough() async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.local, temp: temp)
        let big = patterned(8_000_000, seed: 9)
        let other = patterned(300_000, seed: 10)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options,
            files: ["big.bin": big, "other.bin": other])
        try await domain.startServe()
        let serve = try #require(domain.serve)
        let guardian = try #require(Self.guardian(of: serve.process.processIdentifier), "no fileprovider-guard child of serve")
        // Where the system refuses the setting (some sandboxes answer EIO), the guardian says so.
        let guardLog = (try? String(contentsOfFile: domain.cli.home.path + "/run/guard.log", encoding: .utf8)) ?? ""
        #expect(
            readProcFile("/proc/\(guardian)/oom_score_adj")?.trimmingCharacters(in: .whitespacesAndNewlines) == "-1000"
                || guardLog.contains("cannot set oom_score_adj"), "\(guardLog)")
        let kept = try await domain.cli.run(["domain", "check-mounts"])
        #expect(kept.status == 0 && kept.stdout.isEmpty, "\(kept.stdout) \(kept.stderr)")
        #expect(isMountPoint(domain.replica), "the check detached the mount of a live serve")

        let replica = domain.replica
        let reader = Task { try await runProgram(["cat", replica + "/big.bin"], timeout: 60) }
        kill(guardian, SIGKILL)
        _ = await serve.stop(SIGKILL, timeout: 30)
        let waiting = try await reader.value
        #expect(!waiting.timedOut, "\(waiting)")
        #expect(isMountPoint(domain.replica), "something detached the mount already: this test shows nothing")

        let detached = try await domain.cli.run(["domain", "check-mounts"])
        #expect(detached.status == 0, "\(detached.stderr)")
        #expect(detached.stdout.contains("d: detached its unguarded replica mount"), "\(detached.stdout) \(detached.stderr)")
        #expect(!isMountPoint(domain.replica))
        let later = try await runProgram(["cat", domain.replica + "/other.bin"])
        #expect(!later.succeeded && later.output.isEmpty && later.errorText.contains("No such file"), "\(later)")

        try await domain.startServe()
        for (name, contents) in [("big.bin", big), ("other.bin", other)] {
            let read = try await runProgram(["cat", domain.replica + "/" + name])
            #expect(read.succeeded && read.output == contents, "\(name): \(read)")
        }
        // Both killed again: the next serve detaches what they left before it mounts.
        let evicted = try await domain.cli.run(["evict", "-R", "d:/"])
        #expect(evicted.status == 0, "\(evicted.stderr)")
        let second = try #require(domain.serve)
        kill(try #require(Self.guardian(of: second.process.processIdentifier)), SIGKILL)
        _ = await second.stop(SIGKILL, timeout: 30)
        #expect(isMountPoint(domain.replica))
        try await domain.startServe()
        // The stale mount counts as mounted: wait for the new serve's own.
        let third = try #require(domain.serve)
        #expect(await waitUntil(timeout: 30) { third.output.contains("files on access at") }, "\(third.output)")
        let again = try await runProgram(["cat", domain.replica + "/big.bin"])
        #expect(again.succeeded && again.output == big, "\(again)")
        // Both killed once more: any other command (here 'ls', offline) detaches the mount first.
        let fourth = try #require(domain.serve)
        kill(try #require(Self.guardian(of: fourth.process.processIdentifier)), SIGKILL)
        _ = await fourth.stop(SIGKILL, timeout: 30)
        #expect(isMountPoint(domain.replica))
        let listed = try await domain.cli.run(["ls", "d:/"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stderr.contains("detached the replica mount"), "\(listed.stderr)")
        #expect(!isMountPoint(domain.replica))
        await store.stop()
    }

    /// What the dataless mode's contract says of programs that map holes (README's mode table,
    /// `domain add`): a program that opens a file, then maps its data with `SEEK_DATA` and
    /// `SEEK_HOLE` and reads only that (as sparse-aware copy and backup tools do) gets zeros
    /// where a large file of a progressive domain was not downloaded; a file of up to 16 MiB is
    /// filled when it is opened, and so is any file `tar` opens, so `tar --sparse` archives
    /// every byte and exits 0.
    @Test func programsThatMapHolesGetZerosOfALargeFileNeverDownloadedButTarGetsEveryByte() async throws {
        let temp = try TemporaryFolder()
        let store = try await StoreUnderTest(.local, temp: temp)
        let small = patterned(200_000, seed: 11)
        let large = patterned(20 * 1024 * 1024, seed: 12)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options,
            files: ["small.bin": small, "large.bin": large, "mapped.bin": large])
        try await domain.startServe()
        // A sparse-aware copy, as tar --sparse maps a file: the data segments first (what
        // SEEK_DATA calls data), then only those are read; holes stay holes.
        let sparseCopy = """
            import os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY)
            size = os.fstat(fd).st_size
            segments, offset = [], 0
            while offset < size:
                try:
                    start = os.lseek(fd, offset, os.SEEK_DATA)
                except OSError:
                    break
                offset = os.lseek(fd, start, os.SEEK_HOLE)
                segments.append((start, offset))
            out = bytearray(size)
            for start, end in segments:
                out[start:end] = os.pread(fd, end - start, start)
            sys.stdout.buffer.write(out)
            """
        for (name, contents) in [("small.bin", small), ("mapped.bin", large)] {
            let run = try await runProgram(["python3", "-c", sparseCopy, domain.replica + "/" + name])
            #expect(run.succeeded, "\(run)")
            if name == "small.bin" {
                #expect(run.output == contents, "filled on open: \(Self.difference(run.output, contents))")
            } else {
                #expect(run.output.count == contents.count)
                #expect(run.output != contents, "a program that maps holes read every byte: the docs' limit no longer holds, say so")
                #expect(run.output.suffix(4096) == Data(count: 4096), "the end of the large file was not read as zeros")
            }
        }
        let archive = temp.url.appendingPathComponent("a.tar").path
        let out = temp.url.appendingPathComponent("out").path
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let tar = try await runProgram(["tar", "--sparse", "-cf", archive, "-C", domain.replica, "small.bin", "large.bin"], timeout: 120)
        #expect(tar.succeeded, "\(tar)")
        let extracted = try await runProgram(["tar", "-xf", archive, "-C", out])
        #expect(extracted.succeeded, "\(extracted)")
        #expect(FileManager.default.contents(atPath: out + "/small.bin") == small)
        let archived = FileManager.default.contents(atPath: out + "/large.bin") ?? Data()
        #expect(archived == large, "tar --sparse: \(Self.difference(archived, large))")
        let why = try await domain.cli.run(["why", "d:/mapped.bin"])
        #expect(why.stdout.contains("programs that map holes first (SEEK_DATA/SEEK_HOLE"), "\(why.stdout) \(why.stderr)")
        try await domain.stopServe()
        await store.stop()
    }
}
