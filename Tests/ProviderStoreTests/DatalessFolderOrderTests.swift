import Foundation
import ProviderCore
import Testing

@testable import ProviderStore

/// The order `serve` populates dataless folders in the background
/// (`datalessFolderPaths(domainID:nearestFirst:)`): nearest the root, then most recently used,
/// then by path, at most a page.
@Suite struct DatalessFolderOrderTests {
    func dataless(_ domainID: Int64, _ path: String) -> ItemRecord {
        var folder = record(domainID, path, folder: true)
        folder.isDataless = true
        return folder
    }

    @Test func nearestTheRootThenMostRecentlyUsedThenByPathAPageAtATime() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let other = try makeDomain(store, "other")
            let upserts = [
                record(id, ""), record(id, "done", folder: true), dataless(id, "z"), dataless(id, "y"), dataless(id, "x"),
                dataless(id, "x/deep"), dataless(id, "x/deep/deeper"), dataless(id, "a/b"), record(id, "a", folder: true),
                record(id, "z/file"),
            ]
            try store.apply(domainID: id, upserts: upserts, deletions: [])
            try store.apply(domainID: other, upserts: [dataless(other, "elsewhere")], deletions: [])
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            try store.recordUse(domainID: id, identifiers: ["z"], at: base.addingTimeInterval(20))
            try store.recordUse(domainID: id, identifiers: ["y"], at: base.addingTimeInterval(10))
            // A deeper folder used last still comes after every folder nearer the root.
            try store.recordUse(domainID: id, identifiers: ["x/deep/deeper"], at: base.addingTimeInterval(99))
            #expect(
                try store.datalessFolderPaths(domainID: id, nearestFirst: 100) == [
                    "z", "y", "x", "a/b", "x/deep", "x/deep/deeper",
                ])
            #expect(try store.datalessFolderPaths(domainID: id, nearestFirst: 2) == ["z", "y"])
            #expect(try store.datalessFolderPaths(domainID: other, nearestFirst: 100) == ["elsewhere"])
            // Populated: gone from the list.
            var populated = dataless(id, "z")
            populated.isDataless = false
            try store.apply(domainID: id, upserts: [populated], deletions: [])
            #expect(try store.datalessFolderPaths(domainID: id, nearestFirst: 1) == ["y"])
        }
    }
}
