import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Dataless folders (past the population budget) of a `dataless` domain, opened, listed and
/// read by programs that are not ours through the replica path (the mount), never through the
/// backing folder: the real `fileproviderctl serve` (its background population off, so the
/// folders are populated because a program opened them), the real kernel, `ls`, `find`, `cat`.
@Suite("Dataless folders through the replica path", .serialized, .timeLimit(.minutes(10)))
struct DatalessFolderAccessTests {
    /// 2,000 files at depth 1 (past the budget of 250), and a folder of 251 entries whose
    /// subfolders hold the files at depth 3 (dataless because the folder above them is).
    static func storeFiles() -> [String: Data] {
        var files: [String: Data] = [:]
        for index in 0..<2000 { files[String(format: "big/f%04d", index)] = Data("big \(index)\n".utf8) }
        for index in 0..<250 { files[String(format: "d1/x%03d", index)] = Data("x \(index)\n".utf8) }
        files["d1/d2/y.txt"] = Data("y\n".utf8)
        files["d1/d2/d3/deep.txt"] = Data("deep\n".utf8)
        files["d1/d2/d3/z.bin"] = patterned(300_000, seed: 35)
        files["w/f0007"] = Data("the store's f0007\n".utf8)
        for index in 0..<300 where index != 7 { files[String(format: "w/f%04d", index)] = Data("w \(index)\n".utf8) }
        return files
    }

    /// The names `ls -1` prints for a folder of the replica.
    static func listed(_ path: String) async throws -> [String] {
        let run = try await runProgram(["ls", "-1", path])
        #expect(run.succeeded, "ls \(path): \(run)")
        return String(decoding: run.output, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    @Test(arguments: [ServedDomain.Store.local, .sftp])
    func foldersPastTheBudgetAreListedAndReadThroughTheReplicaPath(_ kind: ServedDomain.Store) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        let files = Self.storeFiles()
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        let before = try #require(try await domain.cli.json(["ls", "d:/"]) as? [[String: Any]])
        for folder in ["/big", "/d1", "/w"] {
            #expect(before.first { $0["path"] as? String == folder }?["dataless"] as? Bool == true, "\(folder): \(before)")
        }
        try await domain.startServe(["--no-populate-in-background"])
        let replica = domain.replica

        // Depth 1: ls opens the folder, which serve fills before ls reads it.
        let big = try await Self.listed(replica + "/big")
        #expect(big.count == 2000, "ls listed \(big.count) of 2,000 entries: \(domain.logs.suffix(2000))")
        let cat = try await runProgram(["cat", replica + "/big/f1234"])
        #expect(cat.succeeded && cat.output == files["big/f1234"], "cat: \(cat)")

        // Depth 3 below dataless folders: find opens each folder in turn.
        let found = try await runProgram(["find", replica + "/d1", "-type", "f"])
        #expect(found.succeeded, "find: \(found)")
        let paths = String(decoding: found.output, as: UTF8.self).split(separator: "\n")
        #expect(paths.count == 253, "find found \(paths.count) of 253 files")
        let deep = try await runProgram(["cat", replica + "/d1/d2/d3/deep.txt"])
        #expect(deep.succeeded && deep.output == Data("deep\n".utf8), "cat: \(deep)")
        let compared = try await runProgram(["cmp", replica + "/d1/d2/d3/z.bin", store.folder + "/d1/d2/d3/z.bin"])
        #expect(compared.succeeded, "cmp: \(compared)")
        #expect(try await Self.listed(replica + "/d1/d2/d3").sorted() == ["deep.txt", "z.bin"])

        // A program writes into a dataless folder nothing listed yet: a new name is a new item,
        // and the name of an item of the store is that item's edit, never a "name 2" beside it.
        let wrote = try await runProgram([
            "sh", "-c", "printf 'mine\\n' > \"$0/f0007\" && printf 'new\\n' > \"$0/mine.txt\"", replica + "/w",
        ])
        #expect(wrote.succeeded, "\(wrote)")
        let arrived = await waitUntil(timeout: 60) {
            domain.stored("w/mine.txt") == Data("new\n".utf8) && domain.stored("w/f0007") == Data("mine\n".utf8)
        }
        #expect(arrived, "the store has w/f0007 \(domain.stored("w/f0007").map { String(decoding: $0, as: UTF8.self) } ?? "-")")
        let w = try await Self.listed(replica + "/w")
        #expect(w.count == 301 && w.contains("mine.txt"), "\(w.count) entries: \(w.filter { $0.contains(" ") })")
        #expect(!w.contains { $0.hasPrefix("f0007 ") })
        let stored = try FileManager.default.contentsOfDirectory(atPath: store.folder + "/w")
        #expect(stored.count == 301, "the store has \(stored.filter { $0.contains(" ") })")
        let conflicts = try await domain.cli.run(["conflicts", "d"])
        #expect(!conflicts.stdout.contains("f0007"), "\(conflicts.stdout)")
        try await domain.stopServe()
        await store.stop()
    }

    @Test(arguments: [ServedDomain.Store.local, .sftp])
    func aSyncThatAddsEntriesWhileServeRunsFillsWhatProgramsOpen(_ kind: ServedDomain.Store) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        var files: [String: Data] = [:]
        for index in 0..<300 { files[String(format: "big/f%04d", index)] = Data("big \(index)\n".utf8) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        try await domain.startServe(["--no-populate-in-background"])
        let replica = domain.replica
        // serve's own sync at its start is over before the store changes: otherwise it can list
        // "new" half written (594 of 600 once) and make it before the signalled sync.
        let startSynced = await waitUntil(timeout: 60) { domain.logs.contains(" conflicts; ") }
        #expect(startSynced, "serve's first sync did not end: \(domain.logs.suffix(2000))")

        // New in the store: entries of the dataless folder, and a new folder past the budget.
        for index in 300..<350 { try domain.write(String(format: "big/f%04d", index), Data("big \(index)\n".utf8)) }
        for index in 0..<600 { try domain.write(String(format: "new/z%03d.txt", index), Data("z \(index)\n".utf8)) }
        // Listed after "new" by the same sync: keeps the sync running once "new" was made.
        for index in 0..<5000 { try domain.write(String(format: "slow/s%04d", index), Data()) }
        let signalled = try await domain.cli.run(["signal", "d"])
        #expect(signalled.status == 0, "\(signalled.stderr)")
        // The dataless folder the sync adds to, opened meanwhile: filled before or after the
        // sync, never shown empty.
        async let early = Self.listed(replica + "/big")
        // Listed as soon as the sync made it, while the sync still runs (it lists "slow"
        // next): the listing waits for the folder's items.
        let made = await waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: replica + "/new") }
        #expect(made, "the new folder never appeared: \(domain.logs.suffix(2000))")
        let new = try await Self.listed(replica + "/new")
        #expect(new.count == 600, "ls listed \(new.count) of 600 entries: \(domain.logs.suffix(2000))")
        let cat = try await runProgram(["cat", replica + "/new/z599.txt"])
        #expect(cat.succeeded && cat.output == Data("z 599\n".utf8), "cat: \(cat)")
        let during = try await early
        // Never empty: the 300 it had, and what the sync had placed in it so far (up to 350).
        #expect((300...350).contains(during.count), "ls listed \(during.count) entries during the sync")
        let all = try await Self.listed(replica + "/big")
        #expect(all.count == 350, "ls listed \(all.count) of 350 entries")
        let added = try await runProgram(["cat", replica + "/big/f0349"])
        #expect(added.succeeded && added.output == Data("big 349\n".utf8), "cat: \(added)")
        try await domain.stopServe()
        await store.stop()
    }
}
