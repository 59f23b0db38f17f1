import Foundation
import ProviderCore
import Testing

@testable import ProviderStore

/// Due downloads read in pages (issue #18): every page size gives each due row once, across
/// the outdated downloaded files, the pinned placeholders and the placeholders below pinned
/// folders (a pinned folder inside another one, a pinned placeholder below a pinned folder).
@Suite struct DueDownloadPageStoreTests {
    static let due = ["p/a", "p/c", "p/q/b", "p/q/i", "r/e", "r/f"]

    /// A domain with the rows above due and others not.
    func domain(_ store: MetadataStore) throws -> Int64 {
        let id = try makeDomain(store)
        var rows: [ItemRecord] = []
        for (path, pinned) in [("p", true), ("p/q", true), ("p-x", false), ("r", false)] {
            var folder = record(id, path, folder: true)
            folder.contentPolicy = pinned ? .eager : nil
            rows.append(folder)
        }
        for path in ["p/a", "p/q/b", "p/q/i", "p-x/h"] { rows.append(record(id, path)) }
        for path in ["p/c", "r/e"] {
            var pinned = record(id, path)
            pinned.contentPolicy = .eager
            rows.append(pinned)
        }
        for (path, outdated) in [("p/d", false), ("r/f", true), ("r/g", false)] {
            var downloaded = record(id, path)
            downloaded.state = .materialized
            downloaded.localContentVersion = outdated ? Data([0]) : downloaded.item.version.content
            rows.append(downloaded)
        }
        try store.apply(domainID: id, upserts: rows, deletions: [])
        return id
    }

    func pages(_ store: MetadataStore, _ id: Int64, size: Int) throws -> [String] {
        var read: [String] = []
        var cursor: DueDownloadsCursor?
        var pages = 0
        repeat {
            let page = try store.dueDownloads(domainID: id, after: cursor, limit: size)
            #expect(page.records.count <= size)
            read += page.records.map(\.path)
            cursor = page.next
            pages += 1
        } while cursor != nil && pages < 100
        #expect(cursor == nil, "pages of \(size) never end")
        return read
    }

    @Test func everyPageSizeGivesEachDueRowOnce() throws {
        try withStore { store, _ in
            let id = try domain(store)
            for size in [1, 2, 3, 4, 5, 6, 7, 100] {
                let read = try pages(store, id, size: size)
                #expect(read.sorted() == Self.due, "pages of \(size)")
            }
            #expect(try store.dueDownloads(domainID: id).map(\.path).sorted() == Self.due)
        }
    }

    /// A row whose identifier and path hold a NUL (no store should make one) reads back cut
    /// at the NUL: as a row already given. Paging must neither give it again nor stall on it.
    @Test func rowsReadBackCutAtANulNeitherRepeatNorStall() throws {
        try withStore { store, _ in
            let id = try domain(store)
            try store.write { db in
                for suffix in ["x", "y", "z"] {
                    try db.execute(
                        sql: "CREATE TEMP TABLE copied AS SELECT * FROM item WHERE domainID = ? AND identifier IN ('r/f', 'r/e', 'p/a')",
                        arguments: [id])
                    try db.execute(
                        sql: "UPDATE copied SET identifier = identifier || char(0) || ?, path = path || char(0) || ?",
                        arguments: [suffix, suffix])
                    try db.execute(sql: "INSERT INTO item SELECT * FROM copied")
                    try db.execute(sql: "DROP TABLE copied")
                }
            }
            let withNul = try store.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM item WHERE instr(CAST(identifier AS BLOB), x'00') > 0")
            }
            #expect(withNul == 9)
            for size in [1, 2, 3, 100] {
                #expect(try pages(store, id, size: size).sorted() == Self.due, "pages of \(size)")
            }
        }
    }
}
