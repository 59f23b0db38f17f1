import Foundation
import GRDB
import ProviderCore
import ProviderEngine
import ProviderSystem
import ProviderTesting
import Testing

@testable import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// A file the engine downloaded is never a local edit, even when the database does not know it
/// yet (a process killed between the rename and its database write, another process placing it
/// while a sync scans), and marking downloads never hides a real edit.
@Suite struct PlacedDownloadTests {
    /// What a process killed right after renaming a download into place leaves: the file, maybe
    /// still its placeholder beside it, the row as it was before (a placeholder), and the
    /// database's note of the download, written before the rename.
    func forgetDownload(_ f: Fixture, _ controller: DomainController, _ path: String, keepPlaceholder: Bool) throws {
        var record = try controller.record(at: path)
        try noteDownload(f, controller, record)
        record.markPlaceholderForTest()
        try f.manager.store.save(record)
        if keepPlaceholder {
            try Data(PlaceholderMetadata(domain: controller.domain.name, record: record).encoded).write(
                to: f.placeholderURL(controller, path))
        }
    }

    /// The note a download of `record`'s item leaves before its rename: of the file as `record`
    /// records it, or as `print` describes it.
    func noteDownload(_ f: Fixture, _ controller: DomainController, _ record: ItemRecord, _ print: FileFingerprint? = nil) throws {
        try f.manager.store.notePlacedDownloads(
            domainID: controller.domainID,
            [
                PlacedDownload(
                    identifier: record.identifier, contentVersion: record.contentVersion,
                    size: try #require(print?.size ?? record.localSize),
                    modificationNanos: try #require(print?.modificationNanos ?? record.localModificationNanos),
                    inode: try #require(print?.inode ?? record.localInode))
            ])
    }

    /// How many downloads the database has notes of.
    func placedNotes(_ f: Fixture) throws -> Int {
        try f.manager.store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM placedDownload") ?? 0 }
    }

    @Test(arguments: [false, true])
    func aDownloadKilledBeforeItWasRecordedIsRecordedNotUploaded(keepPlaceholder: Bool) async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "log.txt", data: Data("line1\nline2\n".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["log.txt"], recursive: false)) == [nil])
            let placed = try #require(controller.replica.fingerprint(atPath: controller.replica.path("log.txt")))
            try forgetDownload(f, controller, "log.txt", keepPlaceholder: keepPlaceholder)

            let report = try await controller.sync()
            #expect(report.uploaded == 0 && report.conflicts == 0, "\(report.notices)")
            #expect(f.memory.callCount(.createItem) == 0 && f.memory.callCount(.modifyItem) == 0)
            let record = try controller.record(at: "log.txt")
            #expect(record.state == .materialized && !record.isOutdated)
            #expect(record.localInode == placed.inode && record.localSize == placed.size)
            #expect(tree(at: controller.replica.root) == ["log.txt"], "a placeholder left beside the download is removed")
            #expect(try f.manager.store.conflicts(domainID: controller.domainID).isEmpty)
        }
    }

    /// `materialize` after a download killed between its rename and its record downloads again
    /// over the placed file and leaves no placeholder beside it.
    @Test func materializeOverAKilledDownloadLeavesNoPlaceholderBeside() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "d/a.bin", data: bytes(3000, seed: 4))
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 1000)
            #expect(codes(await controller.materialize(paths: ["d/a.bin"], recursive: false)) == [nil])
            try forgetDownload(f, controller, "d/a.bin", keepPlaceholder: true)
            #expect(codes(await controller.materialize(paths: ["d/a.bin"], recursive: false)) == [nil])
            #expect(tree(at: controller.replica.url("d")) == ["a.bin"])
            #expect(try controller.record(at: "d/a.bin").state == .materialized)
        }
    }

    /// A store renames a downloaded file (its identifier comes from its path): the file follows
    /// the new item. Should the process die before the new row is written, the file is still
    /// the new item's download, not a file written over its placeholder.
    @Test func aDownloadThatFollowedAStoreMoveIsTheNewItemsDownload() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "old.txt", data: Data("moved along".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["old.txt"], recursive: false)) == [nil])
            _ = try f.memory.rename(from: "old.txt", to: "new.txt")
            try await controller.sync()
            #expect(try controller.record(at: "new.txt").state == .materialized)
            try forgetDownload(f, controller, "new.txt", keepPlaceholder: true)
            let report = try await controller.sync()
            #expect(report.uploaded == 0 && report.conflicts == 0, "\(report.notices)")
            #expect(try controller.record(at: "new.txt").state == .materialized)
            #expect(tree(at: controller.replica.root) == ["new.txt"])
        }
    }

    /// Another process evicted and downloaded the file again: its inode changed, so the row this
    /// process read no longer matches the file. It is still the engine's download.
    @Test func aFileDownloadedAgainByAnotherProcessIsNotAnEdit() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.bin", data: bytes(5000, seed: 1))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a.bin"], recursive: false)
            _ = await controller.evict(paths: ["a.bin"], recursive: false)
            _ = await controller.materialize(paths: ["a.bin"], recursive: false)
            let now = try #require(controller.replica.fingerprint(atPath: controller.replica.path("a.bin")))
            // The row this process read before: the earlier download, another inode; the other
            // process noted its download and has not written its row yet.
            var stale = try controller.record(at: "a.bin")
            stale.localInode = now.inode + 1
            try f.manager.store.save(stale)
            try noteDownload(f, controller, stale, now)
            // Its fingerprint differs from the stale row; evicting it is still allowed.
            let report = try await controller.sync()
            #expect(report.uploaded == 0)
            #expect(f.memory.callCount(.modifyItem) == 0)
            #expect(try controller.record(at: "a.bin").localInode == now.inode)
            #expect(try placedNotes(f) == 1, "the note of the file the row records, the earlier one dropped")
            try f.manager.store.save(stale)
            try noteDownload(f, controller, stale, now)
            #expect(
                codes(await controller.evict(paths: ["a.bin"], recursive: false)) == [nil], "the engine's own file is not an unsynced edit")
        }
    }

    /// A downloaded file carries the status and the domain's name, and nothing else of the
    /// engine's: the download's note is in the database (an attribute beside those two did not
    /// fit in an ext4 inode and cost each file a block of its own). A
    /// batch of small files and a single one alike; each takes the blocks of a plain file of the
    /// same size with the same two attributes, on the same file system.
    @Test func aDownloadedFileHasTheStatusAndTheDomainOnly() async throws {
        try await Fixture.with { f in
            for index in 0..<20 { _ = try f.memory.write(path: "d/f\(index).bin", data: bytes(4096, seed: UInt64(index))) }
            _ = try f.memory.write(path: "one.bin", data: bytes(4096, seed: 99))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["d"], recursive: true)).allSatisfy { $0 == nil })
            #expect(codes(await controller.materialize(paths: ["one.bin"], recursive: false)) == [nil])
            #expect(try placedNotes(f) == 21, "a note a file")
            let plain = f.url(controller, "plain.bin").path
            try bytes(4096, seed: 7).write(to: URL(fileURLWithPath: plain))
            ReplicaStatus.downloaded.write(atPath: plain, domain: controller.domain.name)
            var plainInfo = stat()
            #expect(stat(plain, &plainInfo) == 0)
            for path in ["one.bin"] + (0..<20).map({ "d/f\($0).bin" }) {
                let full = f.url(controller, path).path
                let names = try ExtendedAttribute.names(atPath: Array(full.utf8)).map { String(decoding: $0, as: UTF8.self) }
                #expect(Set(names) == [ReplicaStatus.attribute, ReplicaStatus.domainAttribute], "\(path): \(names)")
                #expect(ReplicaStatus.read(atPath: full) == .downloaded)
                var info = stat()
                #expect(stat(full, &info) == 0)
                #expect(info.st_blocks == plainInfo.st_blocks, "\(path) takes \(info.st_blocks) blocks of 512 bytes")
            }
            try FileManager.default.removeItem(atPath: plain)
        }
    }

    /// Appending to a downloaded file keeps its inode and its mark: the mark no longer matches
    /// (size and time changed), so the edit goes up.
    @Test func anEditInPlaceOfADownloadedFileIsStillAnEdit() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.txt", data: Data("one".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a.txt"], recursive: false)
            let handle = try FileHandle(forWritingTo: f.url(controller, "a.txt"))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(" two".utf8))
            try handle.close()
            // Even a row that forgot the download (as after a kill) does not hide the edit.
            try forgetDownload(f, controller, "a.txt", keepPlaceholder: false)
            var record = try controller.record(at: "a.txt")
            record.state = .materialized
            try f.manager.store.save(record)
            let report = try await controller.sync()
            #expect(report.uploaded == 1)
            #expect(f.memory.contents(of: "a.txt") == Data("one two".utf8))
        }
    }

    /// `cp -a` of a downloaded file keeps its mark, but not its inode: a copy written at the name
    /// of another, not downloaded item is not taken for that item's download.
    @Test func aCopyOfADownloadAtAnotherItemsNameIsKeptBesideIt() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.txt", data: Data("aaaa".utf8))
            _ = try f.memory.write(path: "b.txt", data: Data("bbbb".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a.txt"], recursive: false)
            let copy = TestProcess()
            copy.executableURL = URL(fileURLWithPath: "/bin/cp")
            copy.arguments = ["-a", f.url(controller, "a.txt").path, f.url(controller, "b.txt").path]
            try copy.run()
            copy.waitUntilExit()
            #expect(copy.terminationStatus == 0)
            let report = try await controller.sync()
            #expect(report.conflicts == 1)
            #expect(f.memory.contents(of: "b.txt") == Data("bbbb".utf8), "b's contents are never replaced by a's")
            #expect(f.memory.callCount(.modifyItem) == 0)
        }
    }

    /// A deletion goes to the store only when the item is still gone when it is sent: a scan
    /// that listed the folder while another process replaced a placeholder with its download
    /// can see neither.
    @Test func aDeletionIsNotSentWhenTheItemIsBackBeforeItGoes() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "x.txt", data: Data("x".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let placeholder = try Data(contentsOf: f.placeholderURL(controller, "x.txt"))
            // The scan sees the placeholder gone; before the deletion is sent (after the new
            // folder, which goes first), the placeholder is back.
            try FileManager.default.removeItem(at: f.placeholderURL(controller, "x.txt"))
            try FileManager.default.createDirectory(at: f.url(controller, "new folder"), withIntermediateDirectories: true)
            f.remote.beforeCreate { try? placeholder.write(to: f.placeholderURL(controller, "x.txt")) }
            let report = try await controller.sync()
            #expect(f.memory.contents(of: "x.txt") == Data("x".utf8), "the item was never deleted")
            #expect(f.memory.callCount(.deleteItem) == 0)
            #expect(report.uploaded == 1)
            #expect(try controller.record(at: "x.txt").state == .placeholder)
        }
    }

    /// An atomic placeholder write and a scan removing abandoned temporary files race: the scan
    /// can lock and delete the temporary file between its creation and the writer's lock. The
    /// writer must notice and never fail (an eviction would report "cannot rename into place").
    @Test func placeholderWritesSurviveScansRemovingAbandonedTemporaryFiles() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-tmp-race-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let replica = Replica(root: folder, staging: folder.appendingPathComponent(".staging"))
        let done = StopFlag()
        let sweeper = Thread {
            while !done.isSet {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] where Replica.isTemporary(name) {
                    replica.removeAbandonedTemporary(atPath: folder.path + "/" + name)
                }
            }
        }
        sweeper.start()
        var failures: [String] = []
        for index in 0..<3_000 {
            do {
                try replica.atomicWrite(Array("placeholder \(index)".utf8), to: folder.path + "/p.placeholder")
            } catch {
                failures.append(error.message)
            }
        }
        done.set()
        #expect(failures.count == 0, "\(failures.count) writes failed, first: \(failures.first ?? "")")
    }
}

extension ItemRecord {
    fileprivate mutating func markPlaceholderForTest() {
        state = .placeholder
        localContentVersion = nil
        localSize = nil
        localModificationNanos = nil
        localInode = nil
    }
}

/// A flag one thread sets and another polls.
private final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
