import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

/// `item_name` (v23) is built by the first name search of a database (v24), not written with
/// every row of a first sync: a search finds the same rows before and after it is there, and
/// writes keep it once it is.
@Suite struct NameIndexTests {
    static func names(_ patterns: String...) -> ItemFilter {
        var filter = ItemFilter()
        filter.names = patterns.map { ItemFilter.Pattern($0) }
        return filter
    }

    @Test func theFirstNameSearchBuildsTheIndexAndWritesKeepIt() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let other = try makeDomain(store, "other")
            let paths = ["a", "a/x.pdf", "a/y.txt", "b", "b/z.pdf", "c.pdf"]
            try store.insertNew(
                domainID: id, records: [record(id, "", folder: true)] + paths.map { record(id, $0, folder: !$0.contains(".")) })
            try store.insertNew(domainID: other, records: [record(other, "", folder: true), record(other, "o.pdf")])
            #expect(try !store.hasNameIndex(), "a first sync writes its rows without item_name")

            // Searches without a name test read the table and build nothing.
            var bySize = ItemFilter()
            bySize.sizes = [.init(.greater, -1, unit: 1)]
            #expect(try store.searchPage(domainID: id, filter: bySize, after: nil, limit: 100).count == paths.count)
            #expect(try !store.hasNameIndex())

            // The first name search builds it and finds what the table holds, in pages.
            let first = try store.searchPage(domainID: id, filter: Self.names("*.pdf"), after: nil, limit: 2)
            #expect(first.map(\.path) == ["a/x.pdf", "b/z.pdf"])
            #expect(try store.hasNameIndex())
            let rest = try store.searchPage(
                domainID: id, filter: Self.names("*.pdf"), after: SearchCursor(first[1]), limit: 2)
            #expect(rest.map(\.path) == ["c.pdf"])

            // Rows written after it, by either way of writing, are found through it.
            try store.insertNew(domainID: id, records: [record(id, "d.pdf")])
            try store.apply(domainID: id, upserts: [record(id, "b/w.pdf")], deletions: [ItemIdentifier("c.pdf")])
            let after = try store.searchPage(domainID: id, filter: Self.names("*.pdf"), after: nil, limit: 100)
            #expect(after.map(\.path) == ["a/x.pdf", "b/w.pdf", "b/z.pdf", "d.pdf"])
            #expect(try store.searchPage(domainID: other, filter: Self.names("*.pdf"), after: nil, limit: 100).map(\.path) == ["o.pdf"])
            #expect(try store.integrityCheck() == "ok")
        }
    }

    @Test func aDatabaseThatHadTheIndexLosesItOnOpeningAndGetsItBackOnSearching() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        do {
            let store = try MetadataStore(url: url)
            let id = try makeDomain(store)
            try store.insertNew(domainID: id, records: [record(id, "", folder: true), record(id, "k.pdf")])
            // As v23 left it, and as a database is after its first name search.
            try store.pool.write { db in try db.execute(sql: MetadataStore.createNameIndex) }
            try store.pool.write { db in try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier LIKE 'v24:%'") }
        }
        let again = try MetadataStore(url: url)
        #expect(try !again.hasNameIndex(), "v24 drops it")
        let id = try #require(try again.domains().first?.id)
        #expect(try again.searchPage(domainID: id, filter: Self.names("k.*"), after: nil, limit: 10).map(\.path) == ["k.pdf"])
        #expect(try again.hasNameIndex())
    }
}
