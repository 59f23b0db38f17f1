import Foundation
import ProviderCore
import ProviderStore
import Testing

@Suite struct MaterializedItemsTests {
    @Test func onlyItemsMaterializedWithTheCurrentContentAreReturned() throws {
        try withStore { store, _ in
            let domain = try makeDomain(store)
            let placeholder = record(domain, "placeholder", size: 3)
            var current = record(domain, "current", size: 3)
            current.state = .materialized
            current.localContentVersion = current.contentVersion
            var outdated = record(domain, "outdated", size: 3)
            outdated.state = .materialized
            outdated.localContentVersion = Data([9])
            var unknown = record(domain, "unknown", size: 3)
            unknown.state = .materialized
            unknown.localContentVersion = nil
            try store.apply(domainID: domain, upserts: [placeholder, current, outdated, unknown], deletions: [])
            let found = try store.materializedItems(
                domainID: domain, identifiers: ["placeholder", "current", "outdated", "unknown", "missing"])
            #expect(Set(found.keys) == ["current"])
            #expect(found["current"]?.path == "current")
            #expect(try store.materializedItems(domainID: domain, identifiers: []).isEmpty)
        }
    }

    @Test func manyIdentifiersAreAskedForInChunksAndAllAnswered() throws {
        try withStore { store, _ in
            let domain = try makeDomain(store)
            // 150 items (three statements of at most 64), every third one materialized; the
            // identifiers asked for come in another order, with unknown ones between.
            let records = (0..<150).map { index -> ItemRecord in
                var item = record(domain, "f\(index)", size: 1)
                if index % 3 == 0 {
                    item.state = .materialized
                    item.localContentVersion = item.contentVersion
                }
                return item
            }
            try store.apply(domainID: domain, upserts: records, deletions: [])
            let asked = (0..<150).reversed().flatMap { [ItemIdentifier("f\($0)"), ItemIdentifier("missing\($0)")] }
            let found = try store.materializedItems(domainID: domain, identifiers: asked)
            #expect(Set(found.keys) == Set((0..<150).filter { $0 % 3 == 0 }.map { ItemIdentifier("f\($0)") }))
            #expect(found.allSatisfy { $0.key == $0.value.identifier && $0.value.path == $0.key.rawValue })
        }
    }
}

@Suite struct RecordDownloadsTests {
    /// A record as a download leaves it: materialized with a local fingerprint.
    private func downloaded(_ base: ItemRecord, size: Int64) -> ItemRecord {
        var record = base
        record.size = size
        record.state = .materialized
        record.localContentVersion = record.contentVersion
        record.localSize = size
        record.localModificationNanos = 1_700_000_000_000_000_000
        record.localInode = 42
        record.lastError = nil
        return record
    }

    @Test func rowsInPlaceAreUpdatedAndOthersWrittenAsApplyWritesThem() throws {
        try withStore { store, _ in
            let domain = try makeDomain(store)
            var failed = record(domain, "dir/a.txt", size: 1)
            failed.lastError = "was down"
            let moved = record(domain, "dir/b.txt", size: 2)
            let untouched = record(domain, "dir/c.txt", size: 3)
            try store.apply(
                domainID: domain, upserts: [record(domain, "dir", folder: true), failed, moved, untouched], deletions: [])
            // In place (another size from the store); moved meanwhile (the download's record
            // still says the new path: the row at the old one goes, as with `apply`); and one the
            // database lost meanwhile (inserted again, as `apply` would).
            let a = downloaded(failed, size: 10)
            var b = downloaded(moved, size: 20)
            b.path = "dir/b2.txt"
            b.filename = "b2.txt"
            let d = downloaded(record(domain, "dir/d.txt", size: 4), size: 4)
            try store.recordDownloads(domainID: domain, records: [a, b, d])
            #expect(try store.item(domainID: domain, identifier: a.identifier) == a)
            #expect(try store.item(domainID: domain, identifier: b.identifier) == b)
            #expect(try store.item(domainID: domain, path: "dir/b.txt") == nil)
            #expect(try store.item(domainID: domain, identifier: d.identifier) == d)
            #expect(try store.item(domainID: domain, identifier: untouched.identifier) == untouched)
            // The counters follow, as the triggers keep them for any write.
            let summary = try store.summary(domainID: domain)
            #expect(summary.materialized == 3 && summary.placeholders == 1 && summary.folders == 1, "\(summary)")
            #expect(summary.materializedBytes == 34)
            try store.recordDownloads(domainID: domain, records: [])
        }
    }
}
