import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The status every program can read on a replica file (`user.fileprovider.status` and
/// `user.fileprovider.domain`), read with `getfattr` as users and scripts do, followed through
/// a file's life: not downloaded, partly downloaded (dataless layout), downloaded, pinned,
/// edited and not sent yet, sent, evicted. Both layouts: `placeholder-files` (the status is on
/// the `.placeholder` file, then on the downloaded file) and `dataless` through the real
/// `serve` (fanotify: root, Linux ≥ 6.14; a dataless file there has no status: no room in its
/// inode beside the dataless mark).
@Suite("Status attributes", .serialized, .timeLimit(.minutes(10)))
struct StatusAttributeTests {
    /// `getfattr -n NAME --only-values PATH`: the value, or `nil` when the file has none.
    static func attribute(_ name: String, of path: String) async throws -> String? {
        let run = try await runProgram(["getfattr", "-n", name, "--only-values", "--absolute-names", path])
        return run.succeeded ? String(decoding: run.output, as: UTF8.self) : nil
    }

    static func status(_ path: String) async throws -> String? {
        try await attribute("user.fileprovider.status", of: path)
    }

    @Test func placeholderFilesShowTheirStatusFromPlaceholderToPinnedEditedSentAndEvicted() async throws {
        let domain = try await PlaceholderFilesDomain("p", files: ["a.txt": Data("first\n".utf8)])
        let (temp, cli, store, replica) = (domain.temp, domain.cli, domain.store, domain.replica)

        let file = replica + "/a.txt"
        #expect(try await Self.status(file + ".placeholder") == "dataless")
        #expect(try await Self.attribute("user.fileprovider.domain", of: file + ".placeholder") == "p")
        #expect(try await cli.run(["materialize", "p:/a.txt"]).status == 0)
        #expect(try await Self.status(file) == "downloaded")
        #expect(try await Self.attribute("user.fileprovider.domain", of: file) == "p")
        #expect(try await cli.run(["pin", "p:/a.txt"]).status == 0)
        #expect(try await Self.status(file) == "pinned")

        // An edit, seen by serve, not sent while the program still has the file open for
        // writing (it has not settled): unsent.
        let log = temp.url.appendingPathComponent("serve.log")
        let serve = try ServeProcess(cli, ["p", "--poll-interval", "3600", "--settle", "3600"], log: log)
        let watching = await waitUntil(timeout: 30) { serve.output.contains("serving p") || !serve.process.isRunning }
        try #require(watching && serve.process.isRunning, "\(serve.output)")
        let handle = try #require(FileHandle(forWritingAtPath: file))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("second\n".utf8))
        let unsent = try await waitUntil(timeout: 30) { try await Self.status(file) == "unsent" }
        let shown = try await Self.status(file) ?? "none"
        #expect(unsent, "the edit is not shown as unsent: \(shown); \(serve.output.suffix(1500))")
        // Closed: finished, so serve sends it; pinned again, and the store has it.
        try handle.close()
        let sent = try await waitUntil(timeout: 30) { try await Self.status(file) == "pinned" }
        #expect(sent, "\(serve.output.suffix(1500))")
        #expect(FileManager.default.contents(atPath: store + "/a.txt") == Data("first\nsecond\n".utf8))
        #expect(await serve.stop(SIGTERM, timeout: 30) == 0)
        // Unpinned (online-only): evicted, a placeholder again.
        #expect(try await cli.run(["unpin", "p:/a.txt"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(try await Self.status(file + ".placeholder") == "dataless")
    }

    /// Files under a pinned folder are pinned, those of a folder without a policy beside them
    /// only downloaded; files the store adds under the pinned folder are downloaded by the
    /// next sync in a batch and each is pinned by inheritance; a policy set later rewrites the
    /// statuses of the files it covers.
    @Test func filesDownloadedInABatchInheritTheirFoldersPolicy() async throws {
        var files: [String: Data] = [:]
        for folder in ["kept/deep", "kept/other", "plain"] {
            for index in 0..<3 { files["\(folder)/f\(index).txt"] = Data("\(folder) \(index)\n".utf8) }
        }
        let domain = try await PlaceholderFilesDomain("p", files: files)
        let (cli, store, replica) = (domain.cli, domain.store, domain.replica)
        let pinned = try await cli.run(["pin", "p:/kept"])
        #expect(pinned.status == 0, "\(pinned)")
        let materialized = try await cli.run(["materialize", "-R", "p:/plain"])
        #expect(materialized.status == 0, "\(materialized)")
        for folder in ["kept/deep", "kept/other"] {
            for index in 0..<3 {
                #expect(try await Self.status("\(replica)/\(folder)/f\(index).txt") == "pinned", "\(folder)/f\(index).txt")
            }
        }
        for index in 0..<3 { #expect(try await Self.status("\(replica)/plain/f\(index).txt") == "downloaded") }
        // New files in the store under the pinned folder: the sync downloads them in a batch,
        // each pinned by inheritance (no policy command runs after it).
        // Enough of them that the sync downloads them in batches of several files.
        try FileManager.default.createDirectory(atPath: store + "/kept/new", withIntermediateDirectories: true)
        let added = ["kept/deep/g.txt", "kept/i.txt"] + (0..<40).map { "kept/new/h\($0).txt" }
        for name in added + ["plain/j.txt"] {
            try Data(name.utf8).write(to: URL(fileURLWithPath: store + "/" + name))
        }
        let synced = try await cli.run(["sync", "p"])
        #expect(synced.status == 0, "\(synced)")
        for name in added {
            #expect(try await Self.status(replica + "/" + name) == "pinned", "\(name)")
        }
        #expect(FileManager.default.fileExists(atPath: replica + "/plain/j.txt.placeholder"))
        #expect(try await cli.run(["pin", "p:/plain"]).status == 0)
        for index in 0..<3 { #expect(try await Self.status("\(replica)/plain/f\(index).txt") == "pinned") }
    }

    /// New files written into the replica and sent together (several at once, their results
    /// recorded in batches) each say they are in the store once the sync returns: `pinned`
    /// under a pinned folder (by inheritance), `downloaded` elsewhere; none stays `unsent`.
    @Test func newFilesSentTogetherSayTheyAreInTheStore() async throws {
        let domain = try await PlaceholderFilesDomain("p", folders: ["kept", "plain"])
        let (cli, store, replica) = (domain.cli, domain.store, domain.replica)
        #expect(try await cli.run(["pin", "p:/kept"]).status == 0)
        try FileManager.default.createDirectory(atPath: replica + "/kept/deep", withIntermediateDirectories: true)
        let kept = (0..<40).map { "kept/n\($0).txt" } + (0..<10).map { "kept/deep/n\($0).txt" }
        let plain = (0..<40).map { "plain/n\($0).txt" }
        for name in kept + plain { try Data(name.utf8).write(to: URL(fileURLWithPath: replica + "/" + name)) }
        let synced = try await cli.run(["sync", "p"])
        #expect(synced.status == 0, "\(synced)")
        for name in kept + plain {
            #expect(FileManager.default.contents(atPath: store + "/" + name) == Data(name.utf8), "\(name)")
        }
        for name in kept { #expect(try await Self.status(replica + "/" + name) == "pinned", "\(name)") }
        for name in plain { #expect(try await Self.status(replica + "/" + name) == "downloaded", "\(name)") }
    }

    @Test func aConflictedCopySaysSoAndTheStoresVersionIsDownloadedUnderTheName() async throws {
        let domain = try await PlaceholderFilesDomain("c", files: ["both.txt": Data("base\n".utf8)])
        let (cli, store, replica) = (domain.cli, domain.store, domain.replica)
        #expect(try await cli.run(["materialize", "c:/both.txt"]).status == 0)
        // Edited on both sides: the local version is kept as a conflicted copy.
        try Data("local edit\n".utf8).write(to: URL(fileURLWithPath: replica + "/both.txt"))
        try Data("store edit, longer\n".utf8).write(to: URL(fileURLWithPath: store + "/both.txt"))
        let synced = try await cli.run(["sync", "c"])
        #expect(synced.status == 0, "\(synced)")
        let names = try FileManager.default.contentsOfDirectory(atPath: replica)
        let copy = try #require(names.first { $0.contains("conflicted copy") }, "\(names)")
        #expect(try await Self.status(replica + "/" + copy) == "conflict")
        #expect(try await Self.attribute("user.fileprovider.domain", of: replica + "/" + copy) == "c")
        // The store's version took the name, downloaded again (the file was).
        #expect(try await Self.status(replica + "/both.txt") == "downloaded")
        #expect(FileManager.default.contents(atPath: replica + "/both.txt") == Data("store edit, longer\n".utf8))
    }

    /// A `materialize` that fails because the store is down says `error` on the file that
    /// stands for the item (the `.placeholder` file here) and `why` says why; once the store is
    /// back the download replaces it with `downloaded`.
    @Test func aFailedDownloadSaysErrorAndWhySaysWhy() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.sftp, temp: temp)
        try Data("contents\n".utf8).write(to: URL(fileURLWithPath: store.folder + "/a.txt"))
        let replica = temp.url.appendingPathComponent("replica").path
        let cli = CLIRunner(in: temp)
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "p", "--backend", store.backend, "--replica", replica]
                + store.options.sorted { $0.key < $1.key }.flatMap { ["--\($0.key)", $0.value] })
        #expect(added.status == 0, "\(added)")
        #expect(try await cli.run(["sync", "p"]).status == 0)
        let placeholder = replica + "/a.txt.placeholder"
        #expect(try await Self.status(placeholder) == "dataless")

        let ssh = try #require(store.ssh)
        await ssh.stopped()
        let failed = try await cli.run(["materialize", "p:/a.txt"])
        #expect(failed.status != 0, "\(failed)")
        #expect(try await Self.status(placeholder) == "error")
        #expect(try await Self.attribute("user.fileprovider.domain", of: placeholder) == "p")
        let why = try await cli.run(["why", "p:/a.txt"])
        #expect(why.stdout.contains("download failed"), "\(why.stdout)")

        try await ssh.restarted()
        let worked = try await cli.run(["materialize", "p:/a.txt"])
        #expect(worked.status == 0, "\(worked)")
        #expect(try await Self.status(replica + "/a.txt") == "downloaded")
        #expect(!FileManager.default.fileExists(atPath: placeholder))
        let after = try await cli.run(["why", "p:/a.txt"])
        #expect(!after.stdout.contains("download failed"), "\(after.stdout)")
        await store.stop()
    }

    @Test func datalessFilesShowTheirStatusThroughPartialDownloadedPinnedUnsentSentAndEvicted() async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        // Past the size filled whole on open (16 MiB): read in ranges.
        let contents = patterned(20 << 20, seed: 42)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store, backend: "local", options: ["root": store], files: ["big.bin": contents],
            addArguments: ["--hydration", "progressive"])
        try await domain.startServe(["--settle", "3600"])
        let file = domain.replica + "/big.bin"
        // Not downloaded: no status (an inode has no room for it beside the dataless mark).
        #expect(try await Self.status(file) == nil)

        let piece = try await runProgram(["dd", "if=\(file)", "bs=4096", "skip=1000", "count=1", "status=none"])
        #expect(piece.succeeded && piece.output == contents.subdata(in: 4_096_000..<4_100_096), "\(piece)")
        #expect(try await Self.status(file) == "partial")
        #expect(try await Self.attribute("user.fileprovider.domain", of: file) == "d")

        let whole = try await runProgram(["cat", file])
        #expect(whole.succeeded && whole.output == contents, "\(whole)")
        let downloaded = try await waitUntil(timeout: 30) { try await Self.status(file) == "downloaded" }
        let afterRead = try await Self.status(file) ?? "none"
        #expect(downloaded, "after every byte was read: \(afterRead)")
        #expect(try await domain.cli.run(["pin", "d:/big.bin"]).status == 0)
        #expect(try await Self.status(file) == "pinned")

        // A program appends and keeps the file open: serve sees the edit and waits for it to
        // settle (the program may write more): unsent.
        // Off the pool: an access through the replica path may wait on serve.
        let fd = try await offThePool { () -> Int32 in
            let fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC)
            if fd >= 0 { _ = write(fd, "tail", 4) }
            return fd
        }
        try #require(fd >= 0, "cannot open \(file): \(String(cString: strerror(errno)))")
        let unsent = try await waitUntil(timeout: 30) { try await Self.status(file) == "unsent" }
        let shown = try await Self.status(file) ?? "none"
        #expect(unsent, "the edit is not shown as unsent: \(shown); \(domain.logs.suffix(1500))")
        // Closed: finished, so serve sends it; pinned again, and the store has it.
        _ = try await offThePool { close(fd) }
        let sent = try await waitUntil(timeout: 30) { try await Self.status(file) == "pinned" }
        #expect(sent, "\(domain.logs.suffix(1500))")
        #expect(FileManager.default.contents(atPath: store + "/big.bin") == contents + Data("tail".utf8))
        try await domain.stopServe()

        // Evicted (unpinned: online-only): dataless, without a status.
        let backing = domain.backing + "/big.bin"
        #expect(try await domain.cli.run(["unpin", "d:/big.bin"]).status == 0)
        #expect(try await Self.status(backing) == nil)
        #expect(try await Self.attribute("user.fileprovider.dataless", of: backing) != nil)
    }
}
