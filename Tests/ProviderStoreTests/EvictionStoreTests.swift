import Foundation
import ProviderCore
import Testing

@testable import ProviderStore

/// What automatic eviction reads and writes: the bytes a domain holds, its candidates in
/// least-recently-used order, the eviction log, budgets.
@Suite struct EvictionStoreTests {
    /// A materialized file of `size` bytes whose file was written with `localSize`.
    func materialized(_ domainID: Int64, _ path: String, size: Int64, localSize: Int64? = nil) -> ItemRecord {
        var file = record(domainID, path, size: size)
        file.state = .materialized
        file.localContentVersion = file.contentVersion
        file.localSize = localSize ?? size
        file.localModificationNanos = 1
        file.localInode = 1
        return file
    }

    @Test func usageCountsMaterializedFilesAndPresentRangesOfPartialFilesOnly() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let other = try makeDomain(store, "other")
            try store.apply(
                domainID: id,
                upserts: [
                    record(id, ""), materialized(id, "a", size: 1000), materialized(id, "b", size: 500, localSize: 700),
                    // Contents not taken by the store yet (-1): the item's size counts.
                    materialized(id, "pending", size: 300, localSize: -1),
                    record(id, "partial", size: 10_000), record(id, "placeholder", size: 99_999), record(id, "folder", folder: true),
                ], deletions: [])
            try store.apply(domainID: other, upserts: [materialized(other, "x", size: 5)], deletions: [])
            try store.addPresentRange(0..<100, domainID: id, identifier: "partial", contentVersion: Data([1]))
            try store.addPresentRange(4000..<4050, domainID: id, identifier: "partial", contentVersion: Data([1]))
            // Ranges of a file that is materialized now are not counted twice.
            try store.addPresentRange(0..<1000, domainID: id, identifier: "a", contentVersion: Data([1]))
            let usage = try store.cacheUsage(domainID: id)
            #expect(usage.materialized == 2000)
            #expect(usage.partial == 150)
            #expect(usage.total == 2150)
            #expect(try store.cacheUsage(domainID: other).total == 5)
            #expect(CacheUsage(materialized: .max, partial: 1).total == .max, "saturates")
        }
    }

    @Test func candidatesComeLeastRecentlyUsedFirstWithoutAUseFirstOfAllPageByPage() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var upserts = [record(id, ""), record(id, "dir", folder: true), record(id, "partial", size: 10)]
            for name in ["a", "b", "c", "d", "dir/e"] { upserts.append(materialized(id, name, size: 10)) }
            try store.apply(domainID: id, upserts: upserts, deletions: [])
            try store.addPresentRange(0..<4, domainID: id, identifier: "partial", contentVersion: Data([1]))
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            try store.recordUse(domainID: id, identifiers: ["a"], at: base.addingTimeInterval(30))
            try store.recordUse(domainID: id, identifiers: ["b"], at: base.addingTimeInterval(10))
            try store.recordUse(domainID: id, identifiers: ["partial"], at: base.addingTimeInterval(20))
            try store.recordUse(domainID: id, identifiers: ["dir/e"], at: base.addingTimeInterval(40))
            // c and d have no recorded use: oldest, by identifier.
            var seen: [String] = []
            var cursor = EvictionCursor.start
            while true {
                let page = try store.evictionCandidates(domainID: id, after: cursor, limit: 2)
                seen += page.map(\.identifier.rawValue)
                guard let last = page.last else { break }
                cursor = last.cursor
            }
            #expect(seen == ["c", "d", "b", "partial", "a", "dir/e"])
            let all = try store.evictionCandidates(domainID: id)
            #expect(all.first { $0.identifier == "partial" }?.isPartial == true)
            #expect(all.first { $0.identifier == "partial" }?.bytes == 4)
            #expect(all.first { $0.identifier == "a" }?.lastUsedAt == base.timeIntervalSince1970 + 30)
            // Below a folder: that folder only.
            #expect(try store.evictionCandidates(domainID: id, below: "dir").map(\.identifier.rawValue) == ["dir/e"])
            #expect(try store.evictionCandidates(domainID: id, below: "a").map(\.identifier.rawValue) == ["a"])
        }
    }

    @Test func recordedUsesKeepTheLaterDate() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let late = Date(timeIntervalSince1970: 1_800_000_100)
            try store.recordUses([id: ["a": late, "b": late]])
            try store.recordUses([id: ["a": late.addingTimeInterval(-50), "b": late.addingTimeInterval(50)]])
            #expect(try store.lastUse(domainID: id, identifier: "a") == late)
            #expect(try store.lastUse(domainID: id, identifier: "b") == late.addingTimeInterval(50))
            try store.recordUses([:])
        }
    }

    /// Uses of a domain removed meanwhile are dropped; the other domains' uses of the same batch
    /// are kept (the foreign key failed the whole batch).
    @Test func usesOfARemovedDomainDoNotLoseTheOthers() throws {
        try withStore { store, _ in
            let kept = try makeDomain(store)
            let removed = try makeDomain(store, "removed")
            try store.deleteDomain(id: removed)
            let when = Date(timeIntervalSince1970: 1_800_000_100)
            try store.recordUses([kept: ["a": when], removed: ["b": when]])
            #expect(try store.lastUse(domainID: kept, identifier: "a") == when)
            #expect(try store.lastUse(domainID: removed, identifier: "b") == nil)
        }
    }

    @Test func theEvictionLogKeepsTheNewestOfEachDomain() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let other = try makeDomain(store, "other")
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            try store.recordEvictions(
                (0..<5).map {
                    EvictionRecord(domainID: id, path: "f\($0)", size: Int64($0), reason: "r", at: base.addingTimeInterval(Double($0)))
                }
                    + [EvictionRecord(domainID: other, path: "x", size: 1, reason: "r", at: base)], keep: 3)
            #expect(try store.evictions(domainID: id).map(\.path) == ["f4", "f3", "f2"])
            #expect(try store.evictions(domainID: id, limit: 1).map(\.path) == ["f4"])
            #expect(try store.evictions(domainID: other).map(\.path) == ["x"])
        }
    }

    @Test func budgetsAndHydrationAreSetAloneAndChecked() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try store.setCacheBudget(domainID: id, 20 << 30)
            try store.setHydration(domainID: id, .progressive)
            var domain = try #require(try store.domain(named: "d"))
            #expect(domain.cacheBudget == 20 << 30)
            #expect(domain.hydration == .progressive)
            try store.setCacheBudget(domainID: id, nil)
            domain = try #require(try store.domain(named: "d"))
            #expect(domain.cacheBudget == nil)
            expectCode(.invalidArgument) { try store.setCacheBudget(domainID: id, -1) }
            expectCode(.providerDomainNotFound) { try store.setCacheBudget(domainID: 999, 1) }
            expectCode(.providerDomainNotFound) { try store.setHydration(domainID: 999, .full) }
        }
    }

    @Test func unfinishedUploadsNameTheirItems() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            for (template, state) in [
                ("modify:a", JournalState.pending), ("move:b", .running), ("delete:c", .done), ("create:d", .pending),
            ] {
                var entry = try store.journal(JournalEntry(domainID: id, templateIdentifier: template, operation: "x", payload: "{}"))
                entry.state = state
                try store.updateJournal(entry)
            }
            #expect(try store.itemsWithUnfinishedOperations(domainID: id) == ["a", "b"])
        }
    }
}
