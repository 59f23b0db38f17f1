import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The FUSE layout's exact local change feed (issue #38): every change programs make through
/// the mount is recorded as it happens, and sync up compares only the folders it names, with
/// the real `fileproviderctl serve` and programs that are not ours (`cp`, `mv`, `rm`, `sed -i`,
/// `sh`'s `>>`, an editor's save by rename). What proves no scan ran: a file written in the
/// backing folder behind the mount, in a folder no program changed, is never sent; serve's log
/// says which folders each sync compared. Durability: a change made just before `kill -9` of
/// `serve` goes up after the restart (its first sync compares the whole replica once), and one
/// left by a clean stop goes up without a whole comparison.
@Suite("FUSE change feed", .serialized, .timeLimit(.minutes(10)))
struct FUSEChangeFeedTests {
    /// The lines of serve's log that summarize a sync (`…; compared N local folders in …`).
    static func syncLines(_ log: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { $0.contains(" local folder") && $0.contains("; compared ") }
    }

    /// How many local folders a summary line says its sync compared, and whether it compared the whole replica.
    static func compared(_ line: String) -> (folders: Int, whole: Bool)? {
        guard let range = line.range(of: "; compared ") else { return nil }
        var rest = line[range.upperBound...]
        let whole = rest.hasPrefix("the whole replica, ")
        if whole { rest = rest.dropFirst("the whole replica, ".count) }
        guard let count = Int(rest.prefix { $0.isNumber }) else { return nil }
        return (count, whole)
    }

    @Test func programsChangesReachTheStoreWithinOneSyncAndOnlyTheirFoldersAreCompared() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        var files: [String: Data] = [
            "a.txt": Data("one x two\n".utf8), "log.txt": Data("first\n".utf8), "keep/k.txt": Data("kept\n".utf8),
            "docs/b.txt": Data("bee\n".utf8), "docs/c.txt": Data("sea\n".utf8), "other/o.txt": Data("other\n".utf8),
        ]
        // Folders no program touches: a scan would read each of them.
        for index in 0..<30 { files["quiet\(index)/q.txt"] = Data("quiet \(index)\n".utf8) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files, layout: .fuse)
        let movedInode = try #require(fileStatus(store.folder + "/docs/b.txt")).st_ino
        // A settle time no test waits for: files go up because the feed saw them finished.
        try await domain.startServe(["--settle", "3600", "-v"])
        // Its first sync compares everything (no clean stop before it).
        let firstDone = await waitUntil(timeout: 60) { Self.syncLines(domain.logs).contains { $0.contains("the whole replica") } }
        #expect(firstDone, "no first sync comparing the whole replica: \(domain.logs.suffix(2000))")
        #expect(domain.logs.contains("the first sync compares the whole replica once"), "\(domain.logs.suffix(2000))")
        let before = Self.syncLines(domain.logs).count

        // Behind the mount, in a folder no program changes: no sync may see it.
        let behindFolder = domain.backing + "/other"
        try #require(fileStatus(behindFolder) != nil, "the folder other is not written in the backing folder")
        try Data("behind\n".utf8).write(to: URL(fileURLWithPath: behindFolder + "/behind.txt"))

        let replica = domain.replica
        let source = temp.url.appendingPathComponent("source.txt").path
        try Data("copied in\n".utf8).write(to: URL(fileURLWithPath: source))
        let editorSave = """
            import os, sys
            path = sys.argv[1]
            with open(path) as f:
                text = f.read()
            tmp = os.path.join(os.path.dirname(path), '.k.txt.save')
            with open(tmp, 'w') as f:
                f.write(text + 'saved by an editor\\n')
            os.rename(tmp, path)
            """
        for run in [
            ["cp", source, replica + "/new.txt"],
            ["mv", replica + "/docs/b.txt", replica + "/moved-b.txt"],
            ["rm", replica + "/docs/c.txt"],
            ["sed", "-i", "s/x/y/", replica + "/a.txt"],
            ["sh", "-c", "echo second >> \"$0\"", replica + "/log.txt"],
            ["python3", "-c", editorSave, replica + "/keep/k.txt"],
            ["sh", "-c", "echo brief > \"$0\" && rm \"$0\"", replica + "/docs/brief.txt"],
        ] {
            let done = try await runProgram(run)
            #expect(done.succeeded, "\(run): \(done)")
        }
        let arrived = await waitUntil(timeout: 60) {
            domain.stored("new.txt") == Data("copied in\n".utf8) && domain.stored("moved-b.txt") == Data("bee\n".utf8)
                && domain.stored("docs/b.txt") == nil && domain.stored("docs/c.txt") == nil
                && domain.stored("a.txt") == Data("one y two\n".utf8) && domain.stored("log.txt") == Data("first\nsecond\n".utf8)
                && domain.stored("keep/k.txt") == Data("kept\nsaved by an editor\n".utf8)
        }
        #expect(arrived, "the changes did not reach the store: \(domain.logs.suffix(3000))")
        // A rename is a move in the store (the local store renames: the same inode), not a copy.
        #expect(fileStatus(store.folder + "/moved-b.txt")?.st_ino == movedInode, "mv was not sent as a move")
        #expect(domain.logs.contains("moved in the store from d:/docs/b.txt"), "\(domain.logs.suffix(3000))")
        // Written and deleted before a sync: nothing went up; neither did the editor's temporary name.
        #expect(domain.stored("docs/brief.txt") == nil && domain.stored("keep/.k.txt.save") == nil)

        // One more sync, and still nothing of what changed behind the mount.
        #expect(try await domain.cli.run(["signal", domain.name]).status == 0)
        let another = await waitUntil(timeout: 60) { Self.syncLines(domain.logs).count >= before + 2 }
        #expect(another, "\(domain.logs.suffix(2000))")
        #expect(domain.stored("other/behind.txt") == nil, "a file written behind the mount was sent: a scan ran")
        let later = Self.syncLines(domain.logs).dropFirst(before)
        #expect(!later.isEmpty && later.allSatisfy { Self.compared($0)?.whole == false }, "\(later)")
        // The folders the programs changed (the root, docs, keep, their passes), never the 30 quiet ones.
        let most = later.compactMap { Self.compared($0)?.folders }.max() ?? 0
        #expect(most > 0 && most <= 12, "a sync compared \(most) folders: \(later)")
        try await domain.stopServe()
        await store.stop()
    }

    @Test func aWriteJustBeforeKillOfServeGoesUpAfterTheRestartAndACleanStopKeepsTheFeed() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        var files: [String: Data] = ["sub/a.txt": Data("a\n".utf8), "other/o.txt": Data("o\n".utf8)]
        for index in 0..<10 { files["quiet\(index)/q.txt"] = Data("quiet\n".utf8) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files, layout: .fuse)

        /// Pauses syncing (`domain disconnect`, which a running serve hears at once): a change
        /// made then is recorded by the mount and nothing sends it.
        func pause() async throws {
            let serve = try #require(domain.serve)
            #expect(try await domain.cli.run(["domain", "disconnect", domain.name]).status == 0)
            let paused = await waitUntil(timeout: 30) { serve.output.contains("disconnected; not synced until") }
            #expect(paused, "serve did not pause: \(serve.output.suffix(2000))")
        }
        /// The summary lines of the running serve's syncs.
        func lines() -> [String] { Self.syncLines(domain.serve?.output ?? "") }

        // kill -9 right after the program's write returned: the change is in no record.
        try await domain.startServe()
        #expect(await waitUntil(timeout: 60) { !lines().isEmpty }, "no first sync: \(domain.logs.suffix(2000))")
        try await pause()
        let wrote = try await runProgram(["sh", "-c", "echo killed > \"$0\"", domain.replica + "/sub/killed.txt"])
        #expect(wrote.succeeded, "\(wrote)")
        try await domain.killServe()
        #expect(domain.stored("sub/killed.txt") == nil, "sent before the kill (the domain was disconnected)")
        #expect(try await domain.cli.run(["domain", "connect", domain.name]).status == 0)

        // The next serve has no record of a clean stop: its first sync compares everything, and
        // the change goes up.
        try await domain.startServe()
        let recovered = await waitUntil(timeout: 60) { domain.stored("sub/killed.txt") == Data("killed\n".utf8) }
        #expect(recovered, "lost by the kill: \(domain.logs.suffix(2000))")
        #expect(domain.serve?.output.contains("the first sync compares the whole replica once") == true)
        // The file is in the store while its sync still runs: its summary line comes at the end.
        #expect(await waitUntil(timeout: 60) { !lines().isEmpty }, "no sync ended: \(domain.logs.suffix(2000))")
        let afterKill = try #require(lines().first)
        #expect(Self.compared(afterKill)?.whole == true, "\(afterKill)")
        // What a sync sent is compared once more by the next one: a poll now, until one sends nothing.
        let quiet = try await waitUntil(timeout: 60) {
            if lines().last?.contains(": 0 sent,") == true && lines().contains(where: { $0.contains(": 1 sent,") }) { return true }
            _ = try await domain.cli.run(["signal", domain.name])
            _ = await waitUntil(timeout: 5) { lines().last?.contains(": 0 sent,") == true }
            return false
        }
        #expect(quiet, "\(lines())")

        // A clean stop keeps what was not sent; the next serve compares only that.
        try await pause()
        let kept = try await runProgram(["sh", "-c", "echo kept > \"$0\"", domain.replica + "/sub/kept.txt"])
        #expect(kept.succeeded, "\(kept)")
        try await domain.stopServe()
        #expect(domain.stored("sub/kept.txt") == nil)
        // Behind the mount while nothing serves: no record says so, so nothing sends it.
        try Data("behind\n".utf8).write(to: URL(fileURLWithPath: domain.backing + "/other/behind.txt"))
        #expect(try await domain.cli.run(["domain", "connect", domain.name]).status == 0)
        try await domain.startServe()
        let sent = await waitUntil(timeout: 60) { domain.stored("sub/kept.txt") == Data("kept\n".utf8) }
        #expect(sent, "the change kept by the clean stop did not go up: \(domain.logs.suffix(2000))")
        #expect(await waitUntil(timeout: 60) { !lines().isEmpty }, "no sync ended: \(domain.logs.suffix(2000))")
        let output = domain.serve?.output ?? ""
        #expect(output.contains("the first sync compares only the folders changed before the last stop"), "\(output.suffix(2000))")
        #expect(lines().allSatisfy { Self.compared($0)?.whole == false }, "\(lines())")
        let first = try #require(lines().first)
        let counts = try #require(Self.compared(first))
        #expect(counts.folders >= 1 && counts.folders <= 2, "\(first)")
        #expect(domain.stored("other/behind.txt") == nil, "a whole comparison ran after a clean stop")
        try await domain.stopServe()
        await store.stop()
    }
}
