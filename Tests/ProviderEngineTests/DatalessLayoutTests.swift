import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The dataless layout of a replica folder: a file that is not downloaded is a sparse file
/// under its real name, marked dataless, and nothing the engine does takes it for contents or
/// deletes a file with contents in its place.
@Suite struct DatalessLayoutTests {
    /// A temporary replica folder in the dataless layout (``ReplicaLayoutTests/Folder``).
    typealias Folder = ReplicaLayoutTests.Folder

    /// A downloader of `controller`'s domain into `replica` (a test's own dataless folder).
    static func downloader(_ f: Fixture, _ controller: DomainController, _ replica: Replica) -> Downloader {
        let domain = controller.context
        let context = DomainContext(
            domain: domain.domain, domainID: domain.domainID, backend: domain.backend, replica: replica, store: domain.store,
            executor: domain.executor, newDatalessFolders: domain.newDatalessFolders, logger: domain.logger)
        return Downloader(context: context, depth: 2, space: f.manager.spaceReservations)
    }

    /// Files of a memory store, synced, as dataless files of a replica folder of their own
    /// (``Folder``), with a downloader into it: the setup the fill tests share.
    struct DatalessFiles {
        let controller: DomainController
        let folder: Folder
        let downloader: Downloader
        /// The files' records, in the order the files were given.
        let records: [ItemRecord]
        var replica: Replica { folder.replica }

        /// Writes `files` into `f`'s memory store, adds its domain and syncs it, then makes each
        /// file a dataless file of a new ``Folder``.
        init(_ f: Fixture, _ files: [(path: String, contents: Data)]) async throws {
            for file in files { _ = try f.memory.write(path: file.path, data: file.contents) }
            controller = try await f.addDomain()
            try await controller.sync()
            folder = try Folder()
            downloader = DatalessLayoutTests.downloader(f, controller, folder.replica)
            let controller = self.controller
            records = try files.map { try controller.record(at: $0.path) }
            for record in records {
                try folder.replica.createPlaceholder(record.path, PlaceholderMetadata(domain: "mem", record: record))
            }
        }
    }

    /// `a.bin` of a synced memory store holding `contents`, as a dataless file of a replica of
    /// its own, with a downloader and a progressive hydrator for it.
    struct PartialFile {
        let controller: DomainController
        let folder: Folder
        let downloader: Downloader
        let record: ItemRecord
        let hydrator = ProgressiveHydrator(logger: Logger(label: "test"))
        var replica: Replica { folder.replica }

        init(_ f: Fixture, contents: Data) async throws {
            let file = try await DatalessFiles(f, [("a.bin", contents)])
            (controller, folder, downloader, record) = (file.controller, file.folder, file.downloader, file.records[0])
        }

        /// The file's identity and change time now, as an access's event gives them.
        func access() throws -> (ProgressiveHydrator.FileKey, Int64) {
            var status = stat()
            try #require(lstat(replica.path("a.bin"), &status) == 0)
            return (
                ProgressiveHydrator.FileKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)),
                ProgressiveHydrator.changeTime(status)
            )
        }

        /// Makes bytes `range` present, as an access of them would.
        func provide(_ range: Range<Int64>) async throws -> Bool {
            let (key, changeTime) = try access()
            return try await hydrator.provide(record, key: key, changeTime: changeTime, range: range, downloader: downloader)
        }
    }

    func metadata(_ identifier: String, size: Int64, date: Double = 1_700_000_000.25) -> PlaceholderMetadata {
        var record = ItemRecord(
            domainID: 1,
            item: Item(
                identifier: ItemIdentifier(identifier), parentIdentifier: .rootContainer, filename: identifier, kind: .file,
                size: size, contentModificationDate: Date(timeIntervalSince1970: date)),
            path: identifier)
        record.state = .placeholder
        return PlaceholderMetadata(domain: "d", record: record)
    }

    func blocks(_ path: String) -> Int {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_blocks) : -1
    }

    @Test func aDatalessFileHasTheItemsSizeAndDateAndNoBlocks() throws {
        let folder = try Folder()
        let replica = folder.replica
        try replica.createPlaceholder("big.bin", metadata("big.bin", size: 5 << 20))
        let print = try #require(replica.fingerprint(atPath: replica.path("big.bin")))
        #expect(print.isRegularFile && print.size == 5 << 20)
        #expect(print.modificationNanos == 1_700_000_000_250_000_000)
        #expect(blocks(replica.path("big.bin")) <= 8, "no contents are stored (one block of zeros first)")
        #expect(replica.placeholderExists("big.bin"))
        #expect(replica.isPlaceholder(of: "big.bin", at: "big.bin"))
        #expect(!replica.isPlaceholder(of: "other", at: "big.bin"))
        #expect(!FileManager.default.fileExists(atPath: replica.path("big.bin") + Replica.placeholderSuffix))
        // Written again with a new size: still dataless.
        try replica.writePlaceholder("big.bin", metadata("big.bin", size: 7))
        #expect(replica.fingerprint(atPath: replica.path("big.bin"))?.size == 7)
        #expect(replica.placeholderExists("big.bin"))
        // No temporary files are left.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url.path).sorted() == ["big.bin", "staging"])
    }

    /// Nothing may put a dataless file over contents, or remove contents as if they were a
    /// placeholder.
    @Test func aFileWithContentsIsNeverTakenForAPlaceholder() throws {
        let folder = try Folder()
        let replica = folder.replica
        try Data("mine".utf8).write(to: replica.url("a.txt"))
        #expect(!replica.placeholderExists("a.txt"))
        #expect(throws: FileProviderError.self) { try replica.createPlaceholder("a.txt", metadata("a.txt", size: 10)) }
        #expect(throws: FileProviderError.self) { try replica.writePlaceholder("a.txt", metadata("a.txt", size: 10)) }
        try replica.removePlaceholder("a.txt")
        #expect(try Data(contentsOf: replica.url("a.txt")) == Data("mine".utf8), "the file with contents stays")
        // A download takes the place of a dataless file, never of a file with contents.
        try replica.createPlaceholder("b.txt", metadata("b.txt", size: 4))
        let staged = replica.staging.path + "/b.part"
        try Data("data".utf8).write(to: URL(fileURLWithPath: staged))
        try replica.placeFile(fromPath: staged, at: "b.txt")
        #expect(try Data(contentsOf: replica.url("b.txt")) == Data("data".utf8))
        #expect(!replica.placeholderExists("b.txt"))
        try Data("other".utf8).write(to: URL(fileURLWithPath: staged))
        #expect(throws: FileProviderError.self) { try replica.placeFile(fromPath: staged, at: "a.txt") }
        #expect(try Data(contentsOf: replica.url("a.txt")) == Data("mine".utf8))
    }

    /// An eviction is one rename of a new dataless file over the downloaded one: a program that
    /// has the file open keeps reading the contents; the name then holds no blocks.
    @Test func evictingReplacesTheFileWithANewDatalessOne() throws {
        let folder = try Folder()
        let replica = folder.replica
        let contents = Data(repeating: 0x41, count: 1 << 20)
        try contents.write(to: replica.url("a.bin"))
        let before = try #require(replica.fingerprint(atPath: replica.path("a.bin")))
        let reader = try CloseOnExecFile.reading(replica.url("a.bin"))
        defer { try? reader.close() }
        try replica.replaceWithPlaceholder("a.bin", metadata("a.bin", size: Int64(contents.count)))
        let after = try #require(replica.fingerprint(atPath: replica.path("a.bin")))
        #expect(after.inode != before.inode && after.size == before.size)
        #expect(replica.placeholderExists("a.bin"))
        #expect(blocks(replica.path("a.bin")) <= 8)
        #expect(try reader.readToEnd() == contents, "an open file keeps its contents")
    }

    /// The scan takes dataless files for placeholders: one moved elsewhere is a move of its
    /// item; a materialized item whose file became dataless (evicted by another process) is an
    /// eviction; a file with contents at a dataless item's name is kept beside it.
    @Test func theScanTakesDatalessFilesForPlaceholders() throws {
        let folder = try Folder()
        let replica = folder.replica
        func record(_ path: String, state: ContentState, print: FileFingerprint? = nil) -> ItemRecord {
            var record = ItemRecord(
                domainID: 1,
                item: Item(
                    identifier: ItemIdentifier(path), parentIdentifier: .rootContainer, filename: path, kind: .file, size: 3,
                    contentModificationDate: Date(timeIntervalSince1970: 1_700_000_000)),
                path: path)
            record.state = state
            if let print { record.markMaterialized(contentVersion: record.contentVersion, fingerprint: print) }
            return record
        }
        let root = ItemRecord(
            domainID: 1, item: Item(identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "", kind: .folder), path: "")
        // kept.txt: dataless and unchanged. moved.txt: moved by the user to elsewhere.txt.
        // evicted.txt: materialized in the database, dataless on disk. written.txt: dataless in
        // the database, a file with contents on disk.
        for name in ["kept.txt", "moved.txt", "written.txt"] { try replica.createPlaceholder(name, metadata(name, size: 3)) }
        try FileManager.default.moveItem(at: replica.url("moved.txt"), to: replica.url("elsewhere.txt"))
        try Data("abc".utf8).write(to: replica.url("evicted.txt"))
        let downloaded = try #require(replica.fingerprint(atPath: replica.path("evicted.txt")))
        try replica.replaceWithPlaceholder("evicted.txt", metadata("evicted.txt", size: 3))
        try FileManager.default.removeItem(at: replica.url("written.txt"))
        try Data("new".utf8).write(to: replica.url("written.txt"))
        let records = [
            root, record("kept.txt", state: .placeholder), record("moved.txt", state: .placeholder),
            record("evicted.txt", state: .materialized, print: downloaded), record("written.txt", state: .placeholder),
        ]
        let scanner = LocalScanner(replica: replica, domain: "d", ignore: IgnoreRules(), settleNanos: 0)
        let result = scanner.scan(records: records)
        let described = result.changes.map { change -> String in
            switch change {
            case .created(let path, _, _): return "created \(path)"
            case .modified(let record, _): return "modified \(record.path)"
            case .flagsChanged(let record, _): return "flags of \(record.path)"
            case .writtenOverPlaceholder(let record, _): return "written over \(record.path)"
            case .moved(let record, let to, _): return "moved \(record.path) -> \(to)"
            case .deleted(let record): return "deleted \(record.path)"
            }
        }
        #expect(described.sorted() == ["moved moved.txt -> elsewhere.txt", "written over written.txt"])
        #expect(result.evicted.map(\.path) == ["evicted.txt"])
        #expect(result.strayPlaceholders.isEmpty)
    }

    /// Every byte present while a program has the file open for writing: the access goes on,
    /// but the file is not recorded as the store's bytes (what the program writes would pass
    /// for them and never be sent); once nothing has it open for writing, the next access
    /// completes it.
    @Test func aFileOpenForWritingIsNotCompletedAsTheStoresBytes() async throws {
        try await Fixture.with { f in
            let contents = bytes(300_000, seed: 10)
            let file = try await PartialFile(f, contents: contents)
            let writer = open(file.replica.path("a.bin"), O_WRONLY | O_CLOEXEC)
            try #require(writer >= 0)
            let whileOpen = try await file.provide(0..<300_000)
            #expect(!whileOpen, "completed while a program had it open for writing")
            #expect(Replica.datalessOwner(atPath: file.replica.path("a.bin")) != nil, "no longer dataless")
            #expect(try file.controller.record(at: "a.bin").state != .materialized)
            close(writer)
            let afterClose = try await file.provide(0..<4096)
            #expect(afterClose)
            #expect(try Data(contentsOf: file.replica.url("a.bin")) == contents)
            #expect(try file.controller.record(at: "a.bin").state == .materialized)
        }
    }

    /// A sequential reader finds no hole where one window of read-ahead ends and the next
    /// begins. The next window is planned while the fetch before it is in flight and holds the
    /// marker block after its end, so the window starts after that block; once the fetch wrote
    /// the marker, the block is fetched at once. It was left for the reader, which stopped
    /// there and waited for a fetch of 4 KiB (six times in a `cat` of 1 GiB).
    @Test func readAheadLeavesNoHoleBetweenItsWindows() async throws {
        try await Fixture.with { f in
            let mib: Int64 = 1 << 20
            let contents = bytes(8 << 20, seed: 11)
            let file = try await PartialFile(f, contents: contents)
            // The first read fetches 1.25 MiB (its chunk and the first window, in one call).
            _ = try await file.provide(0..<(128 << 10))
            let gate = Mutex(false)
            f.memory.setHook(for: .fetchPartialContents) { _ in
                while !gate.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(2)) }
            }
            // Past half of the window: the next one (1.25-3.25 MiB) is on its way, held.
            _ = try await file.provide((768 << 10)..<(896 << 10))
            // Past half of that one while it is in flight: the next (up to 7.25 MiB) is planned
            // around the marker block its fetch holds after 3.25 MiB.
            let (key, changeTime) = try file.access()
            let (hydrator, record, downloader) = (file.hydrator, file.record, file.downloader)
            let reader = Task {
                try await hydrator.provide(
                    record, key: key, changeTime: changeTime, range: (9 * mib / 4)..<(9 * mib / 4 + (128 << 10)), downloader: downloader)
            }
            #expect(await eventually { f.memory.callCount(.fetchPartialContents) == 3 })
            gate.withLock { $0 = true }
            _ = try await reader.value
            let horizon = 29 * mib / 4
            let whole = await eventually {
                guard let (key, changeTime) = try? file.access() else { return false }
                return file.hydrator.holds(key, range: 0..<horizon, changeTime: changeTime)
            }
            #expect(whole, "a hole was left between two windows of read-ahead")
            f.memory.setHook(for: .fetchPartialContents, nil)
            #expect(f.memory.bytesServed(by: .fetchPartialContents) == horizon, "each byte fetched once")
            let fd = open(file.replica.path("a.bin"), O_RDONLY | O_CLOEXEC)
            try #require(fd >= 0)
            defer { close(fd) }
            var read = Data(count: Int(horizon))
            let count = read.withUnsafeMutableBytes { pread(fd, $0.baseAddress, Int(horizon), 0) }
            #expect(count == Int(horizon) && read == contents.prefix(Int(horizon)))
        }
    }

    /// An access seen while the file was partly present, handled after another access made it
    /// whole (its entry gone with the completion, its ranges forgotten): nothing is written into
    /// the file. It was: a new entry took every byte for missing and wrote a marker block of
    /// zeros over the contents (found by the on-access kill -9 test, 4 KiB of zeros in a read).
    @Test func anAccessHandledAfterTheFileWasCompletedWritesNothingIntoIt() async throws {
        try await Fixture.with { f in
            let contents = bytes(700_000, seed: 9)
            let file = try await PartialFile(f, contents: contents)
            let (key, _) = try file.access()
            let complete = try await file.provide(0..<700_000)
            #expect(complete)
            #expect(try Data(contentsOf: file.replica.url("a.bin")) == contents)
            // The late access: of the record as the event's handler looked it up before.
            let (_, later) = try file.access()
            await #expect(throws: FileProviderError.self) {
                _ = try await file.hydrator.provide(
                    file.record, key: key, changeTime: later, range: 600_000..<650_000, downloader: file.downloader)
            }
            #expect(try Data(contentsOf: file.replica.url("a.bin")) == contents, "the complete file was written into")
        }
    }

    /// A fill for a program reading a dataless file writes the same inode: a program that had
    /// the file open reads the contents through its descriptor; the file is recorded, dated,
    /// marked as a download and no longer dataless. The bytes are written once, by one ranged
    /// read into the file itself: nothing is staged, no whole-file download is asked for. A
    /// failed fill leaves it dataless, its size intact, no blocks kept.
    @Test func fillingInPlaceWritesTheSameInodeAndAFailureLeavesItDataless() async throws {
        try await Fixture.with { f in
            let contents = bytes(300_000, seed: 7)
            let files = try await DatalessFiles(f, [("a.bin", contents), ("b.bin", Data("bee".utf8))])
            let (controller, replica, downloader) = (files.controller, files.replica, files.downloader)
            let (a, b) = (files.records[0], files.records[1])
            let inode = try #require(replica.fingerprint(atPath: replica.path("a.bin"))).inode
            let reader = try CloseOnExecFile.reading(replica.url("a.bin"))
            defer { try? reader.close() }

            // Two programs at once share one download: the first download is held until the
            // second caller has joined it.
            let (entered, released) = (Mutex(false), Mutex(false))
            let staged = Mutex<[String]?>(nil)
            f.memory.setHook(for: .fetchPartialContents) { _ in
                staged.withLock { $0 = (try? FileManager.default.contentsOfDirectory(atPath: replica.staging.path)) ?? ["?"] }
                entered.withLock { $0 = true }
                while !released.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(2)) }
            }
            let first = Task { try await downloader.fillInPlace(a) }
            #expect(await eventually { entered.withLock { $0 } })
            let second = Task { try await downloader.fillInPlace(a) }
            #expect(await eventually { downloader.joinedFills.withLock { $0 } == 1 })
            released.withLock { $0 = true }
            let (filled, again) = try await (first.value, second.value)
            f.memory.setHook(for: .fetchPartialContents, nil)
            #expect(f.memory.callCount(.fetchPartialContents) == 1)
            #expect(f.memory.callCount(.fetchContents) == 0)
            #expect(f.memory.bytesServed(by: .fetchPartialContents) == Int64(contents.count), "every byte written once")
            #expect(staged.withLock { $0 } == [], "nothing staged while the bytes came")
            #expect(try FileManager.default.contentsOfDirectory(atPath: replica.staging.path) == [])
            #expect(filled == again)
            #expect(try reader.readToEnd() == contents, "the open descriptor reads the contents")
            let print = try #require(replica.fingerprint(atPath: replica.path("a.bin")))
            #expect(print.inode == inode)
            #expect(!replica.placeholderExists("a.bin"))
            #expect(DownloadMark.recognize(a, print, in: replica.noting(downloadsOf: controller.domainID, in: f.manager.store)) != nil)
            let recorded = try controller.record(at: "a.bin")
            #expect(recorded.state == .materialized && recorded.localInode == inode && !recorded.isOutdated)

            f.memory.setFailure(FileProviderError(.serverUnreachable, "down"), for: .fetchPartialContents)
            await #expect(throws: FileProviderError.self) { _ = try await downloader.fillInPlace(b) }
            #expect(replica.placeholderExists("b.bin"), "still dataless")
            #expect(replica.fingerprint(atPath: replica.path("b.bin"))?.size == 3)
            #expect(blocks(replica.path("b.bin")) <= 8)
            #expect(try controller.record(at: "b.bin").state == .placeholder)
            f.memory.setFailure(nil, for: .fetchPartialContents)
            _ = try await downloader.fillInPlace(b)
            #expect(try Data(contentsOf: replica.url("b.bin")) == Data("bee".utf8))
        }
    }

    /// An item that changed in the store since the last sync (another size): the ranged read
    /// of the recorded version is refused, and the fill takes what the store has now from a
    /// staged download, at its new size; nothing stays staged.
    @Test func aFillOfAnItemChangedInTheStoreTakesItsNewContents() async throws {
        try await Fixture.with { f in
            let files = try await DatalessFiles(f, [("a.bin", Data("old".utf8))])
            let (replica, a) = (files.replica, files.records[0])
            _ = try f.memory.write(path: "a.bin", data: Data("newer bytes".utf8))
            let filled = try await files.downloader.fillInPlace(a)
            #expect(try Data(contentsOf: replica.url("a.bin")) == Data("newer bytes".utf8))
            #expect(filled.size == 11 && filled.state == .materialized)
            #expect(f.memory.callCount(.fetchContents) == 1)
            #expect(!replica.placeholderExists("a.bin"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: replica.staging.path) == [])
        }
    }
}
