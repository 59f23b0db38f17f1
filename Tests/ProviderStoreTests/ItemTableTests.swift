import Foundation
import ProviderCore
import ProviderStore
import Testing

@Suite struct ItemTableTests {
    /// root, a/, a/x, a/sub/, a/sub/y, a-b/, a-b/z, a0, a.txt, b
    static let paths: [(String, Bool)] = [
        ("", true), ("a", true), ("a/x", false), ("a/sub", true), ("a/sub/y", false), ("a-b", true),
        ("a-b/z", false), ("a0", false), ("a.txt", false), ("b", false),
    ]

    func fill(_ store: MetadataStore, _ domainID: Int64) throws {
        try store.apply(
            domainID: domainID, upserts: Self.paths.map { record(domainID, $0.0, folder: $0.1, size: 3) }, deletions: [])
    }

    @Test func applyAndFetchByIdentifierAndPath() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let x = try #require(try store.item(domainID: id, identifier: "a/x"))
            #expect(x.path == "a/x")
            #expect(x.filename == "x")
            #expect(x.parentIdentifier == "a")
            #expect(x.state == .placeholder)
            #expect(x.size == 3)
            #expect(x.version == ItemVersion(content: Data([1]), metadata: Data([1, 0xee])))
            #expect(x.modificationDate == Date(timeIntervalSince1970: 1_700_000_000))
            #expect(try store.item(domainID: id, path: "a/sub/y")?.identifier == "a/sub/y")
            #expect(try store.item(domainID: id, path: "")?.identifier == .rootContainer)
            #expect(try store.item(domainID: id, path: "a/nothing") == nil)
            #expect(try store.item(domainID: id, identifier: "nothing") == nil)
            #expect(try store.allItems(domainID: id).count == Self.paths.count)
        }
    }

    @Test func recordRoundTripsEveryField() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var full = record(id, "f.bin", size: 42, version: 7)
            full.state = .materialized
            full.isPinned = true
            full.localContentVersion = Data([7])
            full.localSize = 42
            full.localModificationNanos = 1_700_000_000_123_456_789
            full.localInode = 99
            full.lastError = "boom"
            full.contentHash = "sha256:00"
            full.creationDate = Date(timeIntervalSince1970: 1_600_000_000.5)
            try store.save(full)
            #expect(try store.item(domainID: id, identifier: "f.bin") == full)
            var link = ItemRecord(
                domainID: id,
                item: Item(
                    identifier: "l", parentIdentifier: .rootContainer, filename: "l", kind: .symlink, size: 4, symlinkTargetPath: "../t"),
                path: "l")
            link.lastError = nil
            try store.save(link)
            let fetched = try #require(try store.item(domainID: id, path: "l"))
            #expect(fetched.state == .symlink)
            #expect(fetched.symlinkTarget == "../t")
            #expect(fetched.contentType == ContentType.symlink)
        }
    }

    @Test func childrenAreSortedByName() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let names = try store.children(domainID: id, parent: .rootContainer).filter { !$0.path.isEmpty }.map(\.filename)
            #expect(names == ["a", "a-b", "a.txt", "a0", "b"])
        }
    }

    /// The root's parent is the root itself (as in Apple's model), so a query by parent must
    /// leave the root out, or `ls DOMAIN:` shows the root as an entry of itself.
    @Test func childrenOfTheRootDoNotIncludeTheRoot() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let children = try store.children(domainID: id, parent: .rootContainer)
            #expect(!children.contains { $0.path.isEmpty }, "the root is listed as its own child")
            #expect(children.map(\.filename) == ["a", "a-b", "a.txt", "a0", "b"])
        }
    }

    @Test func childrenOfSubfoldersAreSortedByName() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            #expect(try store.children(domainID: id, parent: "a").map(\.filename) == ["sub", "x"])
            #expect(try store.children(domainID: id, parent: "a/x").isEmpty)
        }
    }

    @Test func descendantsOfAFolderExcludeSiblingsWithTheSamePrefix() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            // "a-b", "a.txt" and "a0" sort right around "a/" but are not inside "a".
            #expect(try store.descendants(domainID: id, of: "a").map(\.path) == ["a/sub", "a/sub/y", "a/x"])
            #expect(try store.descendants(domainID: id, of: "a/sub").map(\.path) == ["a/sub/y"])
            #expect(try store.descendants(domainID: id, of: "a-b").map(\.path) == ["a-b/z"])
            #expect(try store.descendants(domainID: id, of: "b").isEmpty)
            #expect(try store.descendants(domainID: id, of: "missing").isEmpty)
        }
    }

    @Test func descendantsOfTheRootAreEverythingButTheRoot() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let other = try makeDomain(store, "other")
            try store.save(record(other, "a/other-domain"))
            let all = try store.descendants(domainID: id, of: "")
            #expect(all.map(\.path) == Self.paths.map(\.0).filter { !$0.isEmpty }.sorted())
            #expect(!all.contains { $0.identifier == .rootContainer })
        }
    }

    /// The local scan reads one folder at a time by path: the direct children only, whatever
    /// lies below them or sorts right around the folder's name, and never another domain's.
    @Test func childrenByPathAreTheDirectChildrenOnly() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            try store.save(record(id, "a/sub/deeper", folder: true))
            try store.save(record(id, "a/sub/deeper/z", size: 1))
            try store.save(record(id, "a/sub0"))
            let other = try makeDomain(store, "other")
            try store.save(record(other, "a/other-domain"))
            try store.save(record(other, "c"))
            #expect(try store.children(domainID: id, inFolderAt: "").map(\.path) == ["a", "a-b", "a.txt", "a0", "b"])
            #expect(try store.children(domainID: id, inFolderAt: "a").map(\.path) == ["a/sub", "a/sub0", "a/x"])
            #expect(try store.children(domainID: id, inFolderAt: "a/sub").map(\.path) == ["a/sub/deeper", "a/sub/y"])
            #expect(try store.children(domainID: id, inFolderAt: "a-b").map(\.path) == ["a-b/z"])
            #expect(try store.children(domainID: id, inFolderAt: "b").isEmpty)
            #expect(try store.children(domainID: id, inFolderAt: "missing").isEmpty)
            var below: [String] = []
            try store.forEachDescendant(domainID: id, of: "a/sub") { below.append($0.path) }
            #expect(below == ["a/sub/deeper", "a/sub/deeper/z", "a/sub/y"])
            // In pages (the FUSE mount's listings of dataless folders): every child once, in
            // path order, whatever lies below a subfolder between two pages.
            for folder in ["", "a", "a/sub", "b"] {
                var paged: [String] = []
                var after: String?
                while true {
                    let page = try store.children(domainID: id, inFolderAt: folder, after: after, limit: 2)
                    paged += page.map(\.path)
                    guard page.count == 2, let last = page.last else { break }
                    after = last.path
                }
                #expect(paged == (try store.children(domainID: id, inFolderAt: folder).map(\.path)), "\(folder)")
            }
            #expect(try store.children(domainID: id, inFolderAt: "", after: "a", limit: 1).map(\.path) == ["a-b"])
        }
    }

    @Test func applyDeletesThenUpserts() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            // A path-derived rename: the old identifier goes, a new one takes the same path slot
            // in the same transaction.
            var renamed = record(id, "b", size: 9, version: 2)
            renamed.identifier = "b-new-id"
            try store.apply(domainID: id, upserts: [renamed], deletions: ["b", "a0"])
            #expect(try store.item(domainID: id, identifier: "b") == nil)
            #expect(try store.item(domainID: id, identifier: "a0") == nil)
            #expect(try store.item(domainID: id, path: "b")?.identifier == "b-new-id")
            #expect(try store.item(domainID: id, path: "b")?.size == 9)
            // Upserting an existing identifier replaces it.
            var x = try #require(try store.item(domainID: id, identifier: "a/x"))
            x.state = .materialized
            try store.save(x)
            #expect(try store.item(domainID: id, identifier: "a/x")?.state == .materialized)
            #expect(try store.allItems(domainID: id).count == Self.paths.count - 1)
        }
    }

    @Test func itemsOfDomainsAreSeparate() throws {
        try withStore { store, _ in
            let one = try makeDomain(store, "one")
            let two = try makeDomain(store, "two")
            try store.save(record(one, "f"))
            try store.save(record(two, "f", size: 5))
            #expect(try store.item(domainID: one, path: "f")?.size == 0)
            #expect(try store.item(domainID: two, path: "f")?.size == 5)
            #expect(try store.children(domainID: one, parent: .rootContainer).count == 1)
        }
    }

    @Test func summaryCountsByStateWithoutTheRoot() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            var x = try #require(try store.item(domainID: id, identifier: "a/x"))
            x.state = .materialized
            x.isPinned = true
            var y = try #require(try store.item(domainID: id, identifier: "a/sub/y"))
            y.state = .materialized
            var a = try #require(try store.item(domainID: id, identifier: "a"))
            a.isPinned = true
            let link = ItemRecord(
                domainID: id, item: Item(identifier: "l", parentIdentifier: .rootContainer, filename: "l", kind: .symlink),
                path: "l")
            try store.apply(domainID: id, upserts: [x, y, a, link], deletions: [])
            let summary = try store.summary(domainID: id)
            #expect(summary.folders == 3)  // a, a/sub, a-b; not the root
            #expect(summary.placeholders == 4)  // a-b/z, a0, a.txt, b
            #expect(summary.materialized == 2)
            #expect(summary.materializedBytes == 6)
            #expect(summary.symlinks == 1)
            #expect(summary.pinned == 2)
            #expect(summary.total == 10)
            let empty = try makeDomain(store, "empty")
            #expect(try store.summary(domainID: empty) == ItemSummary())
        }
    }
}
