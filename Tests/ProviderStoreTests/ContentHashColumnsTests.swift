import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

/// The engine's SHA-256 beside the store's hash (v21): written by every way rows are written,
/// kept by a move, no longer holding once the content version changes, and what `whereis`,
/// `dupes` and `find --hash` compare by.
@Suite struct ContentHashColumnsTests {
    static let hexA = String(repeating: "a1", count: 32)
    static let hexB = String(repeating: "b2", count: 32)

    @Test func theHashHoldsForItsContentVersionAndIsComparedBeforeTheStores() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var ours = record(id, "x.bin", size: 10)
            ours.state = .materialized
            ours.localContentVersion = ours.contentVersion
            ours.recordSHA256(Self.hexA, of: ours.contentVersion)
            var storeOnly = record(id, "y.bin", size: 10)
            storeOnly.contentHash = "md5:0123456789abcdef0123456789abcdef"
            // Rows of a first sync have no hash (the fresh columns), others are upserted.
            try store.insertNew(domainID: id, records: [record(id, "fresh.bin", size: 10)])
            try store.apply(domainID: id, upserts: [ours, storeOnly], deletions: [])
            let read = try #require(try store.item(domainID: id, path: "x.bin"))
            #expect(read == ours)
            #expect(read.sha256 == Self.hexA && read.localSHA256 == Self.hexA && read.comparableHash == "sha256:" + Self.hexA)
            #expect(try store.item(domainID: id, path: "fresh.bin")?.sha256 == nil)

            // What whereis and dupes read: ours, else the store's.
            let copies = try store.files(ofSize: 10).map { "\($0.path)=\($0.contentHash ?? "-")" }
            #expect(Set(copies) == ["x.bin=sha256:" + Self.hexA, "y.bin=md5:0123456789abcdef0123456789abcdef", "fresh.bin=-"])
            var filter = ItemFilter()
            filter.contentHash = Self.hexA.uppercased()
            #expect(try store.searchPage(domainID: id, filter: filter, after: nil, limit: 10).map(\.path) == ["x.bin"])
            filter.contentHash = "sha256:" + Self.hexA
            #expect(try store.searchPage(domainID: id, filter: filter, after: nil, limit: 10).map(\.path) == ["x.bin"])

            // A new content version from the store: the hash no longer describes the item, nor
            // (once downloaded as that version) the file.
            var changed = read
            changed.contentVersion = Data([9])
            try store.apply(domainID: id, upserts: [changed], deletions: [])
            let stale = try #require(try store.item(domainID: id, path: "x.bin"))
            #expect(stale.sha256 == nil && stale.comparableHash == nil)
            #expect(stale.localSHA256 == Self.hexA, "the downloaded file is still of the hashed version")
            #expect(try store.searchPage(domainID: id, filter: filter, after: nil, limit: 10).isEmpty)

            // A new hash for the new version replaces it.
            var rehashed = stale
            rehashed.localContentVersion = rehashed.contentVersion
            rehashed.recordSHA256(Self.hexB, of: rehashed.contentVersion)
            rehashed.recordSHA256(nil, of: rehashed.contentVersion)
            try store.apply(domainID: id, upserts: [rehashed], deletions: [])
            #expect(try store.item(domainID: id, path: "x.bin")?.sha256 == Self.hexB)
        }
    }

    @Test func theDownloadedFilesOfADomainAreCounted() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var rows: [ItemRecord] = [record(id, "docs", folder: true)]
            for (path, size) in [("a.bin", 5), ("docs/b.bin", 7), ("docs/c.bin", 11), ("docs/not downloaded.bin", 13)] {
                var row = record(id, path, size: Int64(size))
                if !path.contains("not") {
                    row.state = .materialized
                    row.localContentVersion = row.contentVersion
                }
                rows.append(row)
            }
            try store.apply(domainID: id, upserts: rows, deletions: [])
            #expect(try store.downloadedFileTotals(domainID: id, below: "") == (3, 23))
            #expect(try store.downloadedFileTotals(domainID: id, below: "docs") == (2, 18))
            #expect(try store.downloadedFileTotals(domainID: id, below: "docs/b.bin") == (1, 7))
            #expect(try store.downloadedFileTotals(domainID: id, below: "doc") == (0, 0))
        }
    }
}
