import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Progressive hydration (`--hydration progressive`, the default) through the real `serve`, the
/// real kernel and programs that are not ours: a read fetches the chunks it needs, and what is
/// recorded as present is right after any crash.
@Suite("Progressive hydration", .serialized, .timeLimit(.minutes(10)))
struct ProgressiveHydrationTests {
    static let mebibyte = 1 << 20

    /// Writes `count` random bytes into `path` (a program, not Swift byte loops: 1 GiB).
    static func randomFile(_ path: String, bytes count: Int) async throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let made = try await runProgram(["sh", "-c", "head -c \(count) /dev/urandom > \"$0\"", path], timeout: 120)
        try #require(made.succeeded, "\(made)")
    }

    /// A progressive dataless domain on a store of `kind` holding one file of `bytes` random bytes
    /// named `file`, synced (the file dataless); `serve` not started.
    /// The domain keeps its temporary folder.
    static func progressiveDomain(_ kind: ServedDomain.Store, file: String, bytes: Int) async throws -> (
        OnAccessTests.StoreUnderTest, ServedDomain
    ) {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        try await randomFile(store.folder + "/" + file, bytes: bytes)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: [:],
            addArguments: ["--hydration", "progressive"])
        return (store, domain)
    }

    /// Bytes `range` of a file.
    static func bytes(_ path: String, _ range: Range<Int>) throws -> Data {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(range.lowerBound))
        return try handle.read(upToCount: range.count) ?? Data()
    }

    /// The bytes the serve logs say were fetched for `path` (`--log-level debug`).
    static func fetchedBytes(_ logs: String, path: String) -> Int {
        logs.components(separatedBy: "\n").filter { $0.contains(": \(path): fetched bytes ") }.reduce(0) { total, line in
            guard let open = line.lastIndex(of: "("), let count = Int(line[line.index(after: open)...].prefix { $0.isNumber }) else {
                return total
            }
            return total + count
        }
    }

    /// Allocated bytes of a file.
    static func allocated(_ path: String) -> Int { fileStatus(path).map { Int($0.st_blocks) * 512 } ?? -1 }

    @Test func aMebibyteFromTheMiddleOfAGibibyteOverSFTPFetchesAtMostSixteenMebibytes() async throws {
        let size = 1 << 30
        let (store, domain) = try await Self.progressiveDomain(.sftp, file: "big.bin", bytes: size)
        try await domain.startServe(["--log-level", "debug"])
        let offset = size / 2 + 12_345
        let read = try await runProgram([
            "python3", "-c",
            "import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\nsys.stdout.buffer.write(os.pread(fd, \(Self.mebibyte), \(offset)))",
            domain.replica + "/big.bin",
        ])
        #expect(read.succeeded, "\(read)")
        #expect(read.output == (try Self.bytes(store.folder + "/big.bin", offset..<(offset + Self.mebibyte))))
        let fetched = Self.fetchedBytes(domain.logs, path: "big.bin")
        #expect(fetched >= Self.mebibyte && fetched <= 16 * Self.mebibyte, "fetched \(fetched) bytes")
        #expect(Self.allocated(domain.backing + "/big.bin") <= 16 * Self.mebibyte + 4096)
        // The same bytes again: nothing more is fetched.
        let again = try await runProgram([
            "dd", "if=\(domain.replica)/big.bin", "bs=4096", "skip=\(offset / 4096)", "count=16", "status=none",
        ])
        #expect(again.succeeded)
        #expect(Self.fetchedBytes(domain.logs, path: "big.bin") == fetched)
        try await domain.stopServe()
        await store.stop()
    }

    @Test(arguments: [ServedDomain.Store.local, .sftp, .media])
    func aChecksumOfAPartlyPresentFileIsTheStoresAndTheFileIsThenWhole(_ kind: ServedDomain.Store) async throws {
        let size = 40 * Self.mebibyte + 777
        let (store, domain) = try await Self.progressiveDomain(kind, file: "data.bin", bytes: size)
        try await domain.startServe(["--log-level", "debug"])
        let file = domain.replica + "/data.bin"
        // Two pieces first: the file is partly present.
        for skip in [3, 30] {
            let run = try await runProgram(["dd", "if=\(file)", "bs=1M", "skip=\(skip)", "count=1", "status=none"])
            let want = try Self.bytes(store.folder + "/data.bin", (skip << 20)..<((skip + 1) << 20))
            #expect(run.succeeded && run.output == want)
        }
        let partly = Self.fetchedBytes(domain.logs, path: "data.bin")
        #expect(partly > 0 && partly < size, "fetched \(partly) of \(size)")
        let ours = try await runProgram(["sha256sum", file])
        let theirs = try await runProgram(["sha256sum", store.folder + "/data.bin"])
        #expect(ours.succeeded)
        if ours.output.prefix(64) != theirs.output.prefix(64) {
            // Where: the file as it is now (backing folder), and a read of it through the replica.
            let expected = try Data(contentsOf: URL(fileURLWithPath: store.folder + "/data.bin"))
            let onDisk = try Data(contentsOf: URL(fileURLWithPath: domain.backing + "/data.bin"))
            let again = try await runProgram(["cat", file])
            Issue.record(
                "\(kind): sha256sum read bytes that are not the store's; the file on disk now: \(OnAccessTests.difference(onDisk, expected)); a second read: \(OnAccessTests.difference(again.output, expected)); serve's logs end:\n\(domain.logs.suffix(6000))"
            )
        }
        // Every byte present: an ordinary downloaded file, each byte fetched once.
        let whole = await waitUntil(timeout: 30) {
            ((try? await domain.cli.run(["ls", "--json", "d:/"]))?.stdout.contains("\"materialized\"")) == true
        }
        #expect(whole, "\(domain.logs.suffix(2000))")
        #expect(Self.fetchedBytes(domain.logs, path: "data.bin") == size)
        try await domain.stopServe()
        await store.stop()
    }

    @Test func killNineDuringProgressiveReadsLeavesOnlyRecordedRangesThatAreRight() async throws {
        let size = 96 * Self.mebibyte
        let (store, domain) = try await Self.progressiveDomain(.local, file: "big.bin", bytes: size)
        let original = try Data(contentsOf: URL(fileURLWithPath: store.folder + "/big.bin"))
        var generator = CrashTests.Generator(state: UInt64(Date().timeIntervalSince1970))
        var recordedRounds = 0
        for round in 0..<6 {
            try await domain.startServe()
            let replica = domain.replica
            // Readers in order and at random places.
            let readers = [
                Task { try await runProgram(["cat", replica + "/big.bin"], timeout: 60) },
                Task {
                    try await runProgram(
                        [
                            "python3", "-c",
                            "import os, random, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\nr = random.Random(\(round))\nfor _ in range(200): os.pread(fd, 65536, r.randrange(0, \(size)))",
                            replica + "/big.bin",
                        ], timeout: 60)
                },
            ]
            let pause = UInt64.random(in: 5...150, using: &generator)
            try await Task.sleep(nanoseconds: pause * 1_000_000)  // a random moment to kill at, not a synchronization
            try await domain.killServe()
            for reader in readers { _ = try await reader.value }
            // What the database says is present is the store's bytes, byte for byte.
            let metadata = try MetadataStore(url: domain.cli.home.appendingPathComponent("metadata.sqlite"))
            let domainID = try #require(try metadata.domain(named: "d")?.id)
            let record = try #require(try metadata.item(domainID: domainID, path: "big.bin"))
            let ranges = try metadata.presentRanges(
                domainID: domainID, identifier: record.identifier, contentVersion: record.contentVersion)
            if !ranges.isEmpty { recordedRounds += 1 }
            let backing = try Data(contentsOf: URL(fileURLWithPath: domain.backing + "/big.bin"))
            if record.state == .placeholder {
                for range in ranges {
                    let bounds = Int(range.lowerBound)..<Int(range.upperBound)
                    #expect(backing[bounds] == original[bounds], "round \(round): recorded range \(range) is not the store's")
                }
            } else {
                #expect(backing == original, "round \(round): a whole file that is not the store's")
            }
        }
        // After a restart every byte reads right.
        try await domain.startServe()
        let run = try await runProgram(["cat", domain.replica + "/big.bin"])
        #expect(run.succeeded && run.output == original)
        try await domain.stopServe()
        print("progressive kill -9: \(recordedRounds) of 6 rounds ended with recorded ranges")
        await store.stop()
    }

    @Test func aPartlyPresentFileEvictedWhileServedIsFetchedAgainNeverReadAsZeros() async throws {
        // Past OnAccessRequests.fillOnOpenLimit: a smaller file is filled whole when opened.
        let size = 24 * Self.mebibyte
        let (store, domain) = try await Self.progressiveDomain(.local, file: "part.bin", bytes: size)
        try await domain.startServe(["--log-level", "debug"])
        let file = domain.replica + "/part.bin"
        let want = try Self.bytes(store.folder + "/part.bin", (5 << 20)..<(6 << 20))
        for round in 0..<3 {
            let run = try await runProgram(["dd", "if=\(file)", "bs=1M", "skip=5", "count=1", "status=none"])
            #expect(run.succeeded && run.output == want, "round \(round): \(run)")
            let before = Self.fetchedBytes(domain.logs, path: "part.bin")
            // Fetched ranges are recorded once flushed (within about a second): then they count.
            let recorded = await waitUntil(timeout: 30) {
                ((try? await domain.cli.run(["ls", "--json", "d:/part.bin"]))?.stdout.contains("\"presentBytes\"")) == true
            }
            #expect(recorded)
            // Evicted while serve knows its ranges: the blocks go, and the next read fetches.
            if round == 0 {
                // Asked for by name.
                let evicted = try await domain.cli.run(["evict", "d:/part.bin"])
                #expect(evicted.status == 0, "\(evicted.stderr)")
            } else {
                let set = try await domain.cli.run(["domain", "set", "d", "--cache-budget", "0"])
                #expect(set.status == 0, "\(set.stderr)")
                // This pass or serve's own (it runs every few seconds) takes it.
                let pass = try await domain.cli.run(["evict", "--to-budget", "d"])
                #expect(pass.status == 0, "\(pass.stderr)")
            }
            #expect(Self.allocated(domain.backing + "/part.bin") <= 8192)
            let again = try await runProgram(["dd", "if=\(file)", "bs=1M", "skip=5", "count=1", "status=none"])
            #expect(again.succeeded && again.output == want, "round \(round): read after eviction: \(again)")
            #expect(Self.fetchedBytes(domain.logs, path: "part.bin") > before)
            _ = try await domain.cli.run(["domain", "set", "d", "--cache-budget", "none"])
        }
        try await domain.stopServe()
        await store.stop()
    }

    @Test func aProgramsWriteIntoAPartlyPresentFileIsSentAsAnEditAroundTheStoresBytes() async throws {
        let size = 20 * Self.mebibyte
        let (store, domain) = try await Self.progressiveDomain(.local, file: "doc.bin", bytes: size)
        let original = try Data(contentsOf: URL(fileURLWithPath: store.folder + "/doc.bin"))
        try await domain.startServe(["--settle", "0"])
        let at = 7 * Self.mebibyte + 100
        let wrote = try await runProgram([
            "python3", "-c", "import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY)\nos.pwrite(fd, b'LOCAL EDIT', \(at))\nos.close(fd)",
            domain.replica + "/doc.bin",
        ])
        #expect(wrote.succeeded, "\(wrote)")
        var expected = original
        expected.replaceSubrange(at..<(at + 10), with: Data("LOCAL EDIT".utf8))
        // The rest is fetched around the write, and the edit goes up.
        let sent = await waitUntil(timeout: 60) { domain.stored("doc.bin") == expected }
        #expect(sent, "\(domain.logs.suffix(3000))")
        let run = try await runProgram(["cat", domain.replica + "/doc.bin"])
        #expect(run.output == expected)
        try await domain.stopServe()
        await store.stop()
    }
}
