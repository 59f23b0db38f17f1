import Foundation
import ProviderCore
import ProviderStore
import Testing

@Suite struct MigrationTests {
    static let expected = [
        "v1: domains, items, anchors, journal, checkpoints, thumbnails", "v2: conflicts, ignore patterns", "v3: domain backoff",
        "v4: dataless folders",
        "v5: journal by template", "v6: materialized and pinned items", "v7: replica modes",
        "v8: content policies, present ranges, last use, budgets", "v9: item counters", "v10: dataless folders index",
        "v11: counting paused for new rows",
        "v12: items excluded from sync", "v13: folder listings",
        "v14: staged records of a moved folder", "v15: policies indexed by value and on folders",
        "v16: uploads no listing has confirmed", "v17: file system flags", "v18: problems of the last sync",
        "v19: on-access mechanism", "v20: access rules", "v21: content hashes", "v22: mode reason",
        "v23: names indexed for search", "v24: names indexed on first search", "v25: downloads placed before their rows",
    ]

    @Test func migrationsApplyAndAreListedByName() throws {
        try withStore { store, _ in
            let applied = try store.appliedMigrations()
            #expect(applied == Self.expected)
        }
    }

    @Test func reopeningKeepsDataAndAppliesNothingTwice() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        do {
            let store = try MetadataStore(url: url)
            _ = try makeDomain(store, "kept")
        }
        let again = try MetadataStore(url: url)
        #expect(try again.appliedMigrations() == Self.expected)
        #expect(try again.domains().map(\.name) == ["kept"])
        #expect(try again.integrityCheck() == "ok")
    }

    @Test func createsMissingParentFolders() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("a/b/c/metadata.sqlite")
        let store = try MetadataStore(url: url)
        #expect(FileManager.default.fileExists(atPath: url.path))
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func unopenableFileIsLocalIOFailure() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        // A folder where the database file should be.
        let url = folder.path("metadata.sqlite")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        expectCode(.localIOFailure) { try MetadataStore(url: url) }
    }
}
