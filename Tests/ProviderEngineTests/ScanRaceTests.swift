import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

/// Programs go on changing the replica while a sync's scan walks it folder by folder: what the
/// scan read of two folders may not fit together. A move seen in neither folder must never be
/// sent as a deletion (in a dataless domain the store holds the only copy of the file's
/// contents), nor a placeholder seen in both be removed as a stray copy.
@Suite("Changes during a scan")
struct ScanRaceTests {
    /// The two folders of the test domain, and which of them the scan reads first (readdir's
    /// order is the file system's).
    static let folders = ["a", "b"]

    static func other(_ folder: String) -> String { folder == "a" ? "b" : "a" }

    /// A domain with `a/one.bin` and `b/two.bin`, synced; `mode` decides what the files are.
    static func domain(_ f: Fixture, mode: ReplicaMode) async throws -> DomainController {
        _ = try f.memory.write(path: "a/one.bin", data: bytes(5_000, seed: 1))
        _ = try f.memory.write(path: "b/two.bin", data: bytes(6_000, seed: 2))
        let controller = try await f.addDomain(mode: mode)
        try await controller.sync()
        return controller
    }

    /// Calls `change` once, with the folder the scan read first and the one it has not read yet,
    /// right after the first of them is read.
    static func once(_ controller: DomainController, _ change: @escaping @Sendable (_ read: String, _ unread: String) -> Void) {
        let done = Mutex(false)
        controller.syncUp.folderScanned.withLock {
            $0 = { folder in
                guard folders.contains(folder),
                    !done.withLock({
                        let was = $0
                        $0 = true
                        return was
                    })
                else { return }
                change(folder, other(folder))
            }
        }
    }

    static func name(in folder: String) -> String { folder == "a" ? "one.bin" : "two.bin" }

    /// A file moved from a folder the scan has not read into one it has read is in neither
    /// listing: the scan sees the folder change, looks again, and sends a move.
    @Test(arguments: [ReplicaMode.dataless, .placeholderFiles])
    func aFileMovedIntoAFolderAlreadyReadIsMovedNotDeleted(mode: ReplicaMode) async throws {
        try await Fixture.with { f in
            let controller = try await Self.domain(f, mode: mode)
            let before = [f.memory.contents(of: "a/one.bin"), f.memory.contents(of: "b/two.bin")]
            let moved = Mutex<(from: String, to: String)?>(nil)
            Self.once(controller) { read, unread in
                let from = unread + "/" + Self.name(in: unread)
                let to = read + "/moved.bin"
                let source = mode == .dataless ? controller.replica.path(from) : controller.replica.placeholderPath(from)
                let target = mode == .dataless ? controller.replica.path(to) : controller.replica.placeholderPath(to)
                if rename(source, target) == 0 { moved.withLock { $0 = (from, to) } }
            }
            let report = try await controller.sync()
            let (from, to) = try #require(moved.withLock { $0 })
            #expect(report.uploaded == 1, "\(report.notices)")
            #expect(f.memory.contents(of: from) == nil)
            let expected = from.hasPrefix("a/") ? before[0] : before[1]
            #expect(f.memory.contents(of: to) == expected, "the store kept the moved file's contents")
            #expect(try controller.record(at: to).path == to)
        }
    }

    /// A file moved from a folder the scan has read into one it has not is in both listings:
    /// the copy at the new path is not removed as a stray placeholder, and the item moves.
    @Test func aFileMovedIntoAFolderNotReadYetIsKept() async throws {
        try await Fixture.with { f in
            let controller = try await Self.domain(f, mode: .dataless)
            let moved = Mutex<(from: String, to: String)?>(nil)
            Self.once(controller) { read, unread in
                let from = read + "/" + Self.name(in: read)
                let to = unread + "/moved.bin"
                if rename(controller.replica.path(from), controller.replica.path(to)) == 0 { moved.withLock { $0 = (from, to) } }
            }
            try await controller.sync()
            let (from, to) = try #require(moved.withLock { $0 })
            #expect(entry(at: controller.replica.url(to)) == .file, "the moved file is still in the replica")
            #expect(f.memory.contents(of: to) != nil && f.memory.contents(of: from) == nil)
            try await controller.sync()
            #expect(f.memory.contents(of: to) != nil, "nothing deletes it later")
        }
    }

    /// A replica that changes during every scan: the changes that do not delete are sent, the
    /// deletion waits (and says so), and the next sync sends it.
    @Test func aDeletionWaitsWhileTheReplicaNeverHoldsStill() async throws {
        try await Fixture.with { f in
            let controller = try await Self.domain(f, mode: .dataless)
            try FileManager.default.removeItem(at: controller.replica.url("a/one.bin"))
            try Data("new".utf8).write(to: controller.replica.url("b/new.txt"))
            let scans = Mutex(0)
            controller.syncUp.folderScanned.withLock {
                $0 = { folder in
                    guard folder == "" else { return }
                    // An ignored name: it changes the folder and is never sent.
                    let count = scans.withLock {
                        $0 += 1
                        return $0
                    }
                    _ = FileManager.default.createFile(atPath: controller.replica.path("b/busy-\(count).tmp"), contents: Data())
                }
            }
            let report = try await controller.sync()
            #expect(scans.withLock { $0 } == 1 + SyncUp.scansOfAChangingReplica.count)
            #expect(report.notices.contains { $0.contains("1 deletion wait for the next sync") }, "\(report.notices)")
            #expect(f.memory.contents(of: "a/one.bin") != nil, "not deleted yet")
            #expect(f.memory.contents(of: "b/new.txt") == Data("new".utf8), "what deletes nothing is sent")
            controller.syncUp.folderScanned.withLock { $0 = nil }
            try await controller.sync()
            #expect(f.memory.contents(of: "a/one.bin") == nil, "deleted once the replica held still")
        }
    }

    /// serve compares only the folders its watcher saw change. A file moved after the scope
    /// was taken (from a folder in it into one outside it, before the walk began) is missing
    /// from the folder read and in no other: the move changed both folders after the scope was
    /// taken, so the scan holds its deletion back (``LocalScanResult/replicaChangedDuringScan``)
    /// and the sync looks again with what the watcher saw since.
    @Test func aFileMovedAfterAWatchersScopeWasTakenIsNotDeleted() async throws {
        try await Fixture.with { f in
            let controller = try await Self.domain(f, mode: .placeholderFiles)
            #expect(await controller.materialize(paths: ["a/one.bin"], recursive: false).allSatisfy { $0.error == nil })
            // The scope {a} was taken a moment ago; then the file moved into b.
            let scopeTaken = LocalScanner.coarseClockNanos() - 1_000_000_000
            try FileManager.default.moveItem(
                at: controller.replica.url("a/one.bin"), to: controller.replica.url("b/moved.bin"))
            // The walk begins on a later tick of the kernel's coarse clock than the move (as it
            // does when a sync is slow to start): the walk alone would not see it as changing.
            var status = stat()
            #expect(lstat(controller.replica.path("b"), &status) == 0)
            let changed = Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec)
            while LocalScanner.coarseClockNanos() <= changed { sched_yield() }
            let scanner = LocalScanner(
                replica: controller.replica, domain: controller.domain.name, ignore: controller.ignoreRules, settleNanos: 0)
            let records = StoreScanRecords(store: controller.store, domainID: controller.domainID)
            let scope = ScanScope(everything: false, folders: ["a"], trees: [])
            let result = try scanner.scan(records, scope: scope, changesSince: scopeTaken)
            let deletes = result.changes.contains { $0.isDeletion }
            #expect(deletes, "the folder read alone shows a deletion: \(result.changes)")
            #expect(result.replicaChangedDuringScan, "a deletion found after a move since the scope was taken")
            // The sync acts on it as on a change during the walk: a move, nothing deleted.
            let report = try await controller.sync(settleSeconds: 0)
            #expect(f.memory.callCount(.deleteItem) == 0, "\(report.notices)")
            #expect(f.memory.contents(of: "b/moved.bin") == bytes(5_000, seed: 1))
        }
    }

    /// A fill of a dataless file completing while the scan reads its folder: the listing's stat
    /// saw the file mid-fill (dated by the last write, the dataless mark about to go); by the
    /// time the scan compares it, the engine dated it and marked it as its download. The file as
    /// it is now is recognised as the engine's download, never taken for a program's bytes
    /// written over the item (an edit sent to the store; the status attribute it re-stamps
    /// moved the change time under `tar`, which said "file changed as we read it").
    @Test func aFillCompletingWhileItsFolderIsScannedIsTheEnginesDownload() async throws {
        try await Fixture.with { f in
            let controller = try await Self.domain(f, mode: .dataless)
            let record = try controller.record(at: "a/one.bin")
            let path = controller.replica.path("a/one.bin")
            // Mid-fill as the listing sees it: every byte written, no mark, dated now.
            try Downloader.clearDataless(atPath: path)
            try #require(f.memory.contents(of: "a/one.bin")).write(to: URL(fileURLWithPath: path))
            var scanner = LocalScanner(
                replica: controller.replica, domain: controller.domain.name, ignore: controller.ignoreRules, settleNanos: 0)
            scanner.folderListed = { folder in
                guard folder == "a" else { return }
                // The completion: dated as the item, marked as the engine's download.
                guard let date = record.modificationDate else { return }
                try? controller.replica.setModificationDate(date, atPath: path)
                guard let print = controller.replica.fingerprint(atPath: path) else { return }
                DownloadMark.write(atPath: path, identifier: record.identifier, contentVersion: record.contentVersion, fingerprint: print)
            }
            let result = try scanner.scan(StoreScanRecords(store: controller.store, domainID: controller.domainID))
            #expect(result.changes.isEmpty, "taken for a local edit: \(result.changes)")
            #expect(result.placed.map(\.record.path) == ["a/one.bin"])
        }
    }
}
