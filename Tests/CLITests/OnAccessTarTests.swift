import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `tar c` of a tree of a `dataless` domain that was never downloaded, through the replica
/// path: tar compares a file's change time after its open with the one after reading it, and
/// says "file changed as we read it" (exit 1) when a fill ran in between. Small files, and
/// any file tar opens, are filled before the open returns, so tar exits 0 and archives the
/// store's bytes.
@Suite("tar of files never downloaded", .serialized, .timeLimit(.minutes(5)))
struct OnAccessTarTests {
    /// Extracts `archive` into a new folder of `temp` and returns that folder.
    static func extract(_ archive: String, in temp: TemporaryFolder, as name: String) async throws -> String {
        let folder = temp.url.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let run = try await runProgram(["tar", "xf", archive, "-C", folder])
        #expect(run.succeeded, "tar x: \(run)")
        return folder
    }

    /// Runs `tar` with `arguments`, and once more when it said "file changed as we read it":
    /// intermittent (SFTP store, under a loaded run): the change time of a file the engine
    /// filled for tar moved while tar read it. Two causes are fixed: a scan that saw a fill half
    /// done wrote `unsent` on the finished download (`UnsentStatus`), and the SFTP adapter left
    /// the file open for writing a moment after a ranged read returned, so completing it failed
    /// and tar's open went on before it (`LocalFile.close()`; 0 in 62 loaded runs since, 2 in 19
    /// before). Recorded as a known issue where a test still expects it, with the end of
    /// `serve`'s log (`serveLog`) to find a third cause by; the second run's archive must be
    /// right.
    static func tarRecordingTheKnownChangeTimeIssue(
        _ arguments: [String], timeout: Double = 120, serveLog: () -> String = { "" }
    ) async throws -> ProgramRun {
        let run = try await runProgram(arguments, timeout: timeout)
        guard !run.succeeded && run.errorText.contains("file changed as we read it") else { return run }
        let log = serveLog()
        withKnownIssue("tar: file changed as we read it (the change time moved during the fill)", isIntermittent: true) {
            Issue.record("\(run.errorText)\nserve's log:\n\(log.suffix(4000))")
        }
        return try await runProgram(arguments, timeout: timeout)
    }

    @Test(arguments: [ServedDomain.Store.local, .sftp])
    func tarOfATreeNeverDownloadedExitsZeroWithTheStoresBytes(_ kind: ServedDomain.Store) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        var files: [String: Data] = [:]
        files["t/a.txt"] = Data("a\n".utf8)
        files["t/empty"] = Data()
        files["t/sub/deeper/b.bin"] = patterned(70_001, seed: 1)
        files["t/sub/c.bin"] = patterned(3_000_000, seed: 2)
        files["t/sub/d.bin"] = patterned(9_000_000, seed: 3)
        // Past the population budget: tar's opendir fills the folder, then it reads its files.
        for index in 0..<300 { files[String(format: "t/many/n%03d", index)] = Data("note \(index)\n".utf8) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        try await domain.startServe()

        let archive = temp.url.appendingPathComponent("t.tar").path
        let tar = try await runProgram(["tar", "cf", archive, "-C", domain.replica, "t"])
        #expect(tar.succeeded, "tar c: \(tar)")
        #expect(!tar.errorText.contains("changed as we read it"), "\(tar)")
        let out = try await Self.extract(archive, in: temp, as: "out")
        for (path, contents) in files {
            #expect(FileManager.default.contents(atPath: out + "/" + path) == contents, "\(path) in the archive is not the store's")
        }
        try await domain.stopServe()
        await store.stop()
    }

    /// Past the fill-on-open limit, in a progressive domain: tar's open waits until the file is
    /// whole (`OnAccessRequests.wholeFileReaders`), so it exits 0; it used to say "file changed
    /// as we read it" (exit 1) and `tar --sparse` archived zeros after the first chunk.
    @Test(arguments: [ServedDomain.Store.local, .sftp])
    func aLargeFileNeverDownloadedToo(_ kind: ServedDomain.Store) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        let files = ["big/large.bin": patterned(20 << 20, seed: 5), "big/sparse.bin": patterned(18 << 20, seed: 6)]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        try await domain.startServe()

        let archive = temp.url.appendingPathComponent("large.tar").path
        let tar = try await runProgram(["tar", "cf", archive, "-C", domain.replica, "big/large.bin"], timeout: 120)
        #expect(tar.succeeded, "tar c: \(tar)\nserve's log:\n\(tar.succeeded ? "" : String(domain.logs.suffix(4000)))")
        let sparse = temp.url.appendingPathComponent("sparse.tar").path
        let tarSparse = try await runProgram(["tar", "--sparse", "-cf", sparse, "-C", domain.replica, "big/sparse.bin"], timeout: 120)
        #expect(tarSparse.succeeded, "tar --sparse -c: \(tarSparse)")
        let out = try await Self.extract(archive, in: temp, as: "out")
        let sparseOut = try await Self.extract(sparse, in: temp, as: "sparse-out")
        #expect(FileManager.default.contents(atPath: out + "/big/large.bin") == files["big/large.bin"])
        let archived = FileManager.default.contents(atPath: sparseOut + "/big/sparse.bin") ?? Data()
        #expect(archived == files["big/sparse.bin"], "tar --sparse: \(OnAccessTests.difference(archived, files["big/sparse.bin"]!))")
        try await domain.stopServe()
        await store.stop()
    }

    @Test func withFullHydrationALargeFileToo() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        let large = patterned(20 << 20, seed: 4)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options,
            files: ["big/large.bin": large, "big/small.txt": Data("small\n".utf8)], addArguments: ["--hydration", "full"])
        try await domain.startServe()

        let archive = temp.url.appendingPathComponent("big.tar").path
        let tar = try await runProgram(["tar", "cf", archive, "-C", domain.replica, "big"])
        #expect(tar.succeeded, "tar c: \(tar)")
        let out = try await Self.extract(archive, in: temp, as: "out")
        #expect(FileManager.default.contents(atPath: out + "/big/large.bin") == large)
        #expect(FileManager.default.contents(atPath: out + "/big/small.txt") == Data("small\n".utf8))
        try await domain.stopServe()
        await store.stop()
    }
}
