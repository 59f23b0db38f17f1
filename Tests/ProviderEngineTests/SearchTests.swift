import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// `ProviderManager.search` (Apple's searching, for every domain) and `whereis`/`duplicates`
/// as a Swift program calls them: pages, scopes, states the engine adds to the database's tests.
@Suite struct SearchTests {
    /// Every result of `query`, as `DOMAIN:/path`, and the sizes of the pages `body` got.
    func results(_ manager: ProviderManager, _ query: SearchQuery, pageSize: Int) async throws -> ([String], [Int]) {
        var found: [String] = []
        var pages: [Int] = []
        try await manager.search(query, pageSize: pageSize) { page throws(FileProviderError) in
            pages.append(page.count)
            found += page.map(\.location)
        }
        return (found, pages)
    }

    @Test func searchesEveryDomainInPagesWithTheEnginesStates() async throws {
        try await Fixture.with { f in
            for name in ["a.pdf", "b.PDF", "c.txt", "docs/d.pdf", "docs/e.pdf", "docs/deeper/f.pdf"] {
                try f.memory.write(path: name, data: Data(name.utf8))
            }
            let one = try await f.addDomain("one")
            let two = try await f.addDomain("two")
            try await one.sync()
            try await two.sync()
            _ = await two.pin(paths: ["docs"])

            var query = SearchQuery()
            query.filter.names = [.init("*.pdf")]
            let (all, pages) = try await results(f.manager, query, pageSize: 2)
            #expect(Set(all).count == all.count, "an item came twice across pages: \(all)")
            #expect(
                Set(all) == Set(["a.pdf", "docs/d.pdf", "docs/e.pdf", "docs/deeper/f.pdf"].flatMap { ["one:/\($0)", "two:/\($0)"] }))
            #expect(all.prefix(4).allSatisfy { $0.hasPrefix("one:/") }, "domains come in name order: \(all)")
            #expect(pages.allSatisfy { $0 <= 2 })

            query.filter.names = [.init("*.pdf", ignoresCase: true)]
            query.scopes = [.init(domain: "two", path: "docs")]
            #expect(try await results(f.manager, query, pageSize: 1).0 == ["two:/docs/d.pdf", "two:/docs/deeper/f.pdf", "two:/docs/e.pdf"])

            query.scopes = []
            query.pinned = true
            let pinned = try await results(f.manager, query, pageSize: 3).0
            #expect(Set(pinned) == ["two:/docs/d.pdf", "two:/docs/e.pdf", "two:/docs/deeper/f.pdf"])
            query.pinned = false
            query.filter.downloaded = true
            #expect(Set(try await results(f.manager, query, pageSize: 3).0) == Set(pinned), "pinned files are downloaded")

            query.scopes = [.init(domain: "two", path: "nowhere")]
            await expectCode(.noSuchItem) { _ = try await results(f.manager, query, pageSize: 3) }
            query.scopes = [.init(domain: "three")]
            await expectCode(.providerDomainNotFound) { _ = try await results(f.manager, query, pageSize: 3) }
            query.scopes = []
            query.filter.regexes = [.init("([")]
            await expectCode(.invalidArgument) { _ = try await results(f.manager, query, pageSize: 3) }

            // The same contents in both domains: by size only, nothing is hashed yet.
            let copies = try await f.manager.whereis(ItemLocation(domain: "one", path: "docs/d.pdf"))
            #expect(copies.first?.location == "one:/docs/d.pdf")
            #expect(copies.contains { $0.location == "two:/docs/d.pdf" && $0.comparedBy == .size })
            var groups: [SameContent] = []
            try await f.manager.duplicates(pageSize: 1) { page throws(FileProviderError) in groups += page }
            #expect(groups.allSatisfy { $0.comparedBy == .size && $0.files.count >= 2 })
            #expect(groups.contains { Set($0.files.map(\.location)).isSuperset(of: ["one:/c.txt", "two:/c.txt"]) })
        }
    }
}
