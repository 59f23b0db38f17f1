import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Counts arrivals and lets a waiter resume once a number is reached.
actor Counter {
    private var count = 0
    private var waiters: [(Int, CheckedContinuation<Void, Never>)] = []

    func increment() {
        count += 1
        let ready = waiters.filter { $0.0 <= count }
        waiters.removeAll { $0.0 <= count }
        for (_, waiter) in ready { waiter.resume() }
    }

    func wait(for target: Int) async {
        if count >= target { return }
        await withCheckedContinuation { waiters.append((target, $0)) }
    }

    var value: Int { count }
}

/// A value behind a lock, for event handlers.
final class LockedValue<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func set(_ new: T) { lock.withLock { value = new } }
    func get() -> T { lock.withLock { value } }
}

@Suite struct MaterializeTests {
    @Test func materializeGivesAByteIdenticalFile() async throws {
        try await Fixture.with { f in
            // Several MiB so the memory store writes in chunks and reports progress.
            let data = bytes(3 << 20 | 123, seed: 7)
            let date = Date(timeIntervalSince1970: 1_650_000_000.25)
            try f.memory.write(path: "media/big.bin", data: data, modificationDate: date)
            try f.memory.write(path: "media/small.txt", data: Data("s".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let lastTransfer = LockedValue<(bytes: Int64, items: Int)?>(nil)
            let outcomes = await controller.materialize(paths: ["media/big.bin"], recursive: false) { event in
                if case .transfer(let done, _, let items, _, _) = event { lastTransfer.set((done, items)) }
            }
            let transfer = try #require(lastTransfer.get(), "no transfer progress was reported")
            #expect(transfer.bytes == Int64(data.count))
            #expect(transfer.items == 1)
            #expect(outcomes.map(\.path) == ["mem:/media/big.bin"])
            #expect(codes(outcomes) == [nil])
            #expect(try Data(contentsOf: f.url(controller, "media/big.bin")) == data)
            #expect(entry(at: f.placeholderURL(controller, "media/big.bin")) == .none)
            let attributes = try FileManager.default.attributesOfItem(atPath: f.url(controller, "media/big.bin").path)
            let modified = try #require(attributes[.modificationDate] as? Date)
            #expect(abs(modified.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.001)
            let record = try controller.record(at: "media/big.bin")
            #expect(record.state == .materialized)
            #expect(record.localContentVersion == record.contentVersion)
            #expect(record.localSize == Int64(data.count))
            #expect(try controller.summary().materialized == 1)
            #expect(try controller.summary().materializedBytes == Int64(data.count))
            // The other file is untouched; no staging files are left in the replica.
            #expect(tree(at: controller.replica.root) == ["media/", "media/big.bin", "media/small.txt.placeholder"])
            // Materializing again is a no-op.
            #expect(codes(await controller.materialize(paths: ["media/big.bin"], recursive: false)).allSatisfy { $0 == nil })
            #expect(f.memory.callCount(.fetchContents) == 1)
        }
    }

    @Test func materializeAFolderTakesItsFiles() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/a", data: Data("a".utf8))
            try f.memory.write(path: "d/b", data: Data("bb".utf8))
            try f.memory.write(path: "d/sub/c", data: Data("ccc".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let direct = await controller.materialize(paths: ["d"], recursive: false)
            #expect(Set(direct.map(\.path)) == ["mem:/d/a", "mem:/d/b"])
            #expect(codes(direct).allSatisfy { $0 == nil })
            #expect(try controller.record(at: "d/sub/c").state == .placeholder)
            let deep = await controller.materialize(paths: ["d"], recursive: true)
            #expect(deep.map(\.path) == ["mem:/d/sub/c"])
            #expect(tree(at: controller.replica.root) == ["d/", "d/a", "d/b", "d/sub/", "d/sub/c"])
            let missing = await controller.materialize(paths: ["nope"], recursive: false)
            #expect(codes(missing) == [.noSuchItem])
        }
    }

    @Test func aFailedDownloadLeavesThePlaceholder() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "f.bin", data: bytes(10, seed: 1))
            let controller = try await f.addDomain()
            try await controller.sync()
            f.memory.setFailure(FileProviderError(.serverUnreachable, "gone"), for: .fetchContents, times: 1)
            #expect(codes(await controller.materialize(paths: ["f.bin"], recursive: false)) == [.serverUnreachable])
            #expect(tree(at: controller.replica.root) == ["f.bin.placeholder"])
            #expect(try controller.record(at: "f.bin").state == .placeholder)
            #expect(codes(await controller.materialize(paths: ["f.bin"], recursive: false)) == [nil])
            #expect(tree(at: controller.replica.root) == ["f.bin"])
        }
    }

    /// Requests for the same item while its download runs share that download.
    @Test func concurrentMaterializeSharesOneDownload() async throws {
        try await Fixture.with { f in
            let data = bytes(1 << 20, seed: 9)
            try f.memory.write(path: "shared.bin", data: data)
            let controller = try await f.addDomain()
            try await controller.sync()
            let arrived = Counter()
            let release = Gate()
            f.memory.setHook(for: .fetchContents) { _ in
                await arrived.increment()
                await release.wait()
            }
            let callers = 6
            let started = Counter()
            let results = await withTaskGroup(of: [ItemOutcome].self) { group in
                group.addTask { await controller.materialize(paths: ["shared.bin"], recursive: false) }
                // The first download is now held open inside the store.
                await arrived.wait(for: 1)
                for _ in 1..<callers {
                    group.addTask {
                        await started.increment()
                        return await controller.materialize(paths: ["shared.bin"], recursive: false)
                    }
                }
                await started.wait(for: callers - 1)
                // A second call of the same request in one batch, too.
                group.addTask { await controller.materialize(paths: ["shared.bin", "shared.bin"], recursive: false) }
                await release.open()
                var all: [[ItemOutcome]] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
            #expect(results.count == callers + 1)
            for outcome in results { #expect(codes(outcome).allSatisfy { $0 == nil }, "\(outcome.map { $0.error?.message ?? "ok" })") }
            #expect(f.memory.callCount(.fetchContents) == 1, "the same item was downloaded more than once")
            #expect(await arrived.value == 1)
            #expect(try Data(contentsOf: f.url(controller, "shared.bin")) == data)
            #expect(tree(at: controller.replica.root) == ["shared.bin"])
            let record = try controller.record(at: "shared.bin")
            #expect(record.state == .materialized)
            #expect(record.localContentVersion == record.contentVersion)
            #expect(codes(await controller.evict(paths: ["shared.bin"], recursive: false)) == [nil])
        }
    }
}

@Suite struct EvictTests {
    @Test func evictSwapsTheFileBackForItsPlaceholder() async throws {
        try await Fixture.with { f in
            let data = bytes(4096, seed: 2)
            try f.memory.write(path: "d/f.bin", data: data)
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["d/f.bin"], recursive: false)
            let outcomes = await controller.evict(paths: ["d/f.bin"], recursive: false)
            #expect(codes(outcomes) == [nil])
            #expect(tree(at: controller.replica.root) == ["d/", "d/f.bin.placeholder"])
            let metadata = try placeholder(at: f.placeholderURL(controller, "d/f.bin"))
            #expect(metadata.identifier == "d/f.bin")
            #expect(metadata.size == 4096)
            let record = try controller.record(at: "d/f.bin")
            #expect(record.state == .placeholder)
            #expect(record.localContentVersion == nil)
            #expect(record.localInode == nil)
            // Evicting a placeholder is fine and changes nothing.
            #expect(codes(await controller.evict(paths: ["d/f.bin"], recursive: false)) == [nil])
            // And it can come back.
            #expect(codes(await controller.materialize(paths: ["d/f.bin"], recursive: false)) == [nil])
            #expect(try Data(contentsOf: f.url(controller, "d/f.bin")) == data)
        }
    }

    @Test func evictAFolderEvictsItsFiles() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/a", data: Data("a".utf8))
            try f.memory.write(path: "d/sub/b", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["d"], recursive: true)
            #expect(tree(at: controller.replica.root) == ["d/", "d/a", "d/sub/", "d/sub/b"])
            #expect(codes(await controller.evict(paths: ["d"], recursive: true)) == [nil, nil])
            #expect(tree(at: controller.replica.root) == ["d/", "d/a.placeholder", "d/sub/", "d/sub/b.placeholder"])
            #expect(try controller.summary().materialized == 0)
        }
    }

    @Test func evictOfAPinnedItemIsNonEvictable() async throws {
        try await Fixture.with { f in
            let data = Data("pinned".utf8)
            try f.memory.write(path: "p.txt", data: data)
            try f.memory.write(path: "folder/in.txt", data: data)
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.pin(paths: ["p.txt", "folder"])).allSatisfy { $0 == nil })
            #expect(codes(await controller.evict(paths: ["p.txt"], recursive: false)) == [.nonEvictable])
            #expect(codes(await controller.evict(paths: ["folder/in.txt"], recursive: false)) == [.nonEvictable])
            #expect(codes(await controller.evict(paths: ["folder"], recursive: true)) == [.nonEvictable])
            #expect(try Data(contentsOf: f.url(controller, "p.txt")) == data)
            #expect(try Data(contentsOf: f.url(controller, "folder/in.txt")) == data)
            #expect(try controller.record(at: "p.txt").state == .materialized)
            // Lazy again, they can go.
            #expect(codes(await controller.setPolicy(.lazy, paths: ["p.txt", "folder"]).outcomes) == [])
            #expect(codes(await controller.evict(paths: ["p.txt", "folder/in.txt"], recursive: false)) == [nil, nil])
            #expect(tree(at: controller.replica.root) == ["folder/", "folder/in.txt.placeholder", "p.txt.placeholder"])
        }
    }

    @Test func evictOfALocallyModifiedFileIsUnsyncedEditsAndLeavesItAlone() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "doc.txt", data: Data("original".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["doc.txt"], recursive: false)
            let edited = Data("edited locally, not uploaded".utf8)
            try edited.write(to: f.url(controller, "doc.txt"))
            let outcomes = await controller.evict(paths: ["doc.txt"], recursive: false)
            #expect(codes(outcomes) == [.unsyncedEdits])
            #expect(try Data(contentsOf: f.url(controller, "doc.txt")) == edited)
            #expect(entry(at: f.placeholderURL(controller, "doc.txt")) == .none)
            #expect(try controller.record(at: "doc.txt").state == .materialized)
        }
    }
}

@Suite struct PinTests {
    @Test func pinningAFolderMaterializesEverythingBelowAndLaterAdditions() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "p/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "p/sub/b.txt", data: Data("b".utf8))
            try f.memory.write(path: "outside.txt", data: Data("o".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let outcomes = await controller.pin(paths: ["p"])
            #expect(codes(outcomes).allSatisfy { $0 == nil })
            #expect(try controller.record(at: "p").isPinned)
            #expect(try controller.isEffectivelyPinned(controller.record(at: "p/sub/b.txt")))
            #expect(try !controller.isEffectivelyPinned(controller.record(at: "outside.txt")))
            #expect(tree(at: controller.replica.root) == ["outside.txt.placeholder", "p/", "p/a.txt", "p/sub/", "p/sub/b.txt"])

            // Added remotely later: materialized by the next sync.
            let later = bytes(900, seed: 3)
            try f.memory.write(path: "p/sub/c.bin", data: later)
            try f.memory.write(path: "p/new/deeper.txt", data: Data("d".utf8))
            try f.memory.write(path: "outside2.txt", data: Data("o".utf8))
            let report = try await controller.sync()
            #expect(report.downloaded == 2)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(try Data(contentsOf: f.url(controller, "p/sub/c.bin")) == later)
            #expect(entry(at: f.placeholderURL(controller, "p/sub/c.bin")) == .none)
            #expect(try controller.record(at: "p/sub/c.bin").state == .materialized)
            #expect(try controller.record(at: "p/new/deeper.txt").state == .materialized)
            #expect(try controller.record(at: "outside2.txt").state == .placeholder)
            #expect(try controller.summary().pinned == 1)
        }
    }

    /// A sync's notice about a file it could not download names the file once.
    @Test func notDownloadedNoticesNameTheItemOnce() {
        let named = ItemOutcome(
            path: "d:/a.bin", error: FileProviderError(.corruptData, "the download of d:/a.bin was 3 bytes, expected 5; try again"))
        #expect(named.notDownloadedNotice == "not downloaded: the download of d:/a.bin was 3 bytes, expected 5; try again")
        let unnamed = ItemOutcome(path: "d:/a.bin", error: FileProviderError(.serverUnreachable, "connection reset"))
        #expect(unnamed.notDownloadedNotice == "d:/a.bin: not downloaded: connection reset")
        #expect(ItemOutcome(path: "d:/a.bin", error: nil).notDownloadedNotice == nil)
    }

}
