import Foundation
import ProviderCore
import ProviderStore
import Testing

/// A folder's kept listing digest describes its rows exactly: any write to a row in the
/// folder, or to the folder's own row, drops it (Migrations v13).
@Suite struct FolderListingTests {
    static let digest = Data([1, 2, 3, 4])

    /// A domain with folders a and a/b and files in them, and digests kept for the root, a
    /// and a/b in the transaction that wrote the rows.
    static func store(_ store: MetadataStore, firstSync: Bool) throws -> Int64 {
        let id = try makeDomain(store)
        let rows = [
            record(id, "", folder: true), record(id, "a", folder: true), record(id, "a/b", folder: true),
            record(id, "a/one.txt"), record(id, "a/b/two.txt"), record(id, "three.txt"),
        ]
        let listings = [ItemIdentifier.rootContainer, "a", "a/b"].map { FolderListing(identifier: $0, digest: digest) }
        if firstSync {
            try store.insertNew(domainID: id, records: rows, listings: listings)
        } else {
            try store.apply(domainID: id, upserts: rows, deletions: [], listings: listings)
        }
        return id
    }

    static func kept(_ store: MetadataStore, _ id: Int64) throws -> [String] {
        try [ItemIdentifier.rootContainer, "a", "a/b"].filter { try store.listingDigest(domainID: id, folder: $0) != nil }
            .map(\.rawValue)
    }

    @Test(arguments: [true, false])
    func digestsWrittenAfterTheirRowsAreKept(firstSync: Bool) throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: firstSync)
            #expect(try Self.kept(store, id) == [ItemIdentifier.rootContainer.rawValue, "a", "a/b"])
            let unchanged = try store.storedFolder(domainID: id, parent: "a", digest: Self.digest)
            #expect(unchanged.isUnchanged)
            #expect(unchanged.children.map(\.path) == ["a/b"], "only the subfolders are read")
            let other = try store.storedFolder(domainID: id, parent: "a", digest: Data([9]))
            #expect(!other.isUnchanged)
            #expect(other.children.map(\.path) == ["a/b", "a/one.txt"])
        }
    }

    @Test func anUpdatedRowDropsItsFoldersDigestOnly() throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: true)
            var file = try #require(try store.item(domainID: id, path: "a/b/two.txt"))
            file.state = .materialized
            try store.apply(domainID: id, upserts: [file], deletions: [])
            #expect(try Self.kept(store, id) == [ItemIdentifier.rootContainer.rawValue, "a"])
        }
    }

    /// Downloads are recorded with the triggers off: the folders of the rows still lose their
    /// digests, once each, and no other folder does.
    @Test func recordedDownloadsDropTheirFoldersDigestsOnly() throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: true)
            var file = try #require(try store.item(domainID: id, path: "a/b/two.txt"))
            file.state = .materialized
            file.localContentVersion = file.contentVersion
            try store.recordDownloads(domainID: id, records: [file])
            #expect(try Self.kept(store, id) == [ItemIdentifier.rootContainer.rawValue, "a"])
            #expect(try store.item(domainID: id, path: "a/b/two.txt")?.state == .materialized)
        }
    }

    @Test func aFoldersOwnRowDropsItsDigestAndItsParents() throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: false)
            var folder = try #require(try store.item(domainID: id, path: "a/b"))
            folder.isDataless = true
            try store.apply(domainID: id, upserts: [folder], deletions: [])
            #expect(try Self.kept(store, id) == [ItemIdentifier.rootContainer.rawValue])
        }
    }

    @Test func aDeletedOrNewRowDropsItsFoldersDigest() throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: false)
            try store.apply(domainID: id, upserts: [], deletions: ["a/one.txt"])
            #expect(try Self.kept(store, id) == [ItemIdentifier.rootContainer.rawValue, "a/b"])
            try store.apply(domainID: id, upserts: [record(id, "a/b/new.txt")], deletions: [])
            #expect(try Self.kept(store, id) == [ItemIdentifier.rootContainer.rawValue])
        }
    }

    @Test func rowsInsertedWithCountingPausedDropTheirFoldersDigests() throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: true)
            try store.insertNew(domainID: id, records: [record(id, "a/b/four.txt"), record(id, "five.txt")])
            #expect(try Self.kept(store, id) == ["a"])
        }
    }

    @Test func aPolicyOrPathChangeDropsTheDigests() throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: false)
            try store.setContentPolicy(.eager, domainID: id, path: "a/b", clearingBelow: true)
            #expect(try Self.kept(store, id) == [ItemIdentifier.rootContainer.rawValue])
        }
    }

    @Test func removingTheDomainRemovesItsDigests() throws {
        try withStore { store, _ in
            let id = try Self.store(store, firstSync: false)
            try store.deleteDomain(id: id)
            #expect(try Self.kept(store, id).isEmpty)
        }
    }
}

/// What a walk did not reach: the rows whose parent is none of the folders it listed, found by
/// visiting each distinct parent once (a row whose parent has no row of its own included).
@Suite struct UnreachedItemsTests {
    @Test func rowsOutsideTheListedFoldersAreFoundFolderByFolder() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var orphan = record(id, "ghost/x.txt")
            orphan.parentIdentifier = "ghost"
            let rows = [
                record(id, "", folder: true), record(id, "a", folder: true), record(id, "a/b", folder: true),
                record(id, "a/one.txt"), record(id, "a/b/two.txt"), record(id, "a/b/three.txt"), record(id, "c", folder: true),
                record(id, "c/four.txt"), record(id, "top.txt"), orphan,
            ]
            try store.apply(domainID: id, upserts: rows, deletions: [])
            let outside = try store.items(domainID: id, outside: [.rootContainer, "a"])
            #expect(outside.map(\.path).sorted() == ["a/b/three.txt", "a/b/two.txt", "c/four.txt", "ghost/x.txt"])
            #expect(try store.items(domainID: id, outside: [.rootContainer, "a", "a/b", "c", "ghost"]).isEmpty)
            // A parent identifier with a NUL (which a seek cannot pass) is read by a scan instead.
            var odd = record(id, "odd.txt")
            odd.parentIdentifier = ItemIdentifier("p\u{0}q")
            try store.apply(domainID: id, upserts: [odd], deletions: [])
            let all = try store.items(domainID: id, outside: [.rootContainer, "a", "a/b", "c", "ghost"])
            #expect(all.map(\.path) == ["odd.txt"])
        }
    }
}
