import Foundation
import ProviderCore
import Testing

@testable import ProviderStore

/// The queries recursive work pages with (issue #18): a subtree in reverse path order, and the
/// bytes present of partly present files per item, per page and the stale ones, each giving
/// what the whole-domain query gives for those items.
@Suite struct SubtreePageStoreTests {
    func item(_ path: String, domainID: Int64, kind: ItemKind = .file, version: UInt8 = 1) -> ItemRecord {
        let parent = path.split(separator: "/").dropLast().joined(separator: "/")
        return ItemRecord(
            domainID: domainID,
            item: Item(
                identifier: ItemIdentifier(path), parentIdentifier: parent.isEmpty ? .rootContainer : ItemIdentifier(parent),
                filename: String(path.split(separator: "/").last ?? ""), kind: kind, contentType: "public.data", size: 10,
                version: ItemVersion(content: Data([version]), metadata: Data([1]))),
            path: path)
    }

    @Test func aSubtreeDeepestFirstInPagesIsThePathOrderReversed() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let store = try MetadataStore(url: folder.path("metadata.sqlite"))
        let id = try #require(
            try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r")).id)
        let folders = ["a", "a/x", "a/x/deep", "a b", "a-b", "a.c", "b"]
        let files = ["a/f", "a/x/g", "a/x/deep/h", "a/x/deep/i", "a/z", "a b/j", "a-b/k", "a.c/l", "b/m"]
        try store.apply(
            domainID: id, upserts: folders.map { item($0, domainID: id, kind: .folder) } + files.map { item($0, domainID: id) },
            deletions: [])
        for path in ["", "a", "a/x", "b", "a/x/deep/h"] {
            let forward = try store.descendants(domainID: id, of: path).map(\.path)
            for size in [1, 2, 3, 100] {
                var read: [String] = []
                var before: String?
                while true {
                    let page = try store.descendants(domainID: id, of: path, before: before, limit: size)
                    read += page.map(\.path)
                    guard page.count == size, let last = page.last?.path else { break }
                    before = last
                }
                #expect(read == forward.reversed(), "below \(path) in pages of \(size)")
            }
        }
        #expect(try store.descendants(domainID: id, of: "a/x/deep/h", before: nil, limit: 5).isEmpty)
    }

    @Test func bytesPresentPerItemAndPerPageAreTheWholeDomainsAndStaleOnesAreFound() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let store = try MetadataStore(url: folder.path("metadata.sqlite"))
        let id = try #require(
            try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r")).id)
        let paths = ["p", "q", "r", "s", "t"]
        try store.apply(domainID: id, upserts: paths.map { item($0, domainID: id) }, deletions: [])
        for (index, path) in paths.dropLast().enumerated() {
            try store.addPresentRange(
                0..<Int64(100 * (index + 1)), domainID: id, identifier: ItemIdentifier(path), contentVersion: Data([1]))
        }
        try store.addPresentRange(500..<600, domainID: id, identifier: ItemIdentifier("q"), contentVersion: Data([1]))
        // r changes in the store: its ranges are stale; s is downloaded whole (not partly present).
        try store.apply(domainID: id, upserts: [item("r", domainID: id, version: 2)], deletions: [])
        var whole = item("s", domainID: id)
        whole.state = .materialized
        try store.apply(domainID: id, upserts: [whole], deletions: [])
        let domain = try store.partiallyPresent(domainID: id)
        #expect(domain == [ItemIdentifier("p"): 100, ItemIdentifier("q"): 300, ItemIdentifier("r"): 300])
        for path in paths {
            #expect(try store.presentBytes(domainID: id, identifier: ItemIdentifier(path)) == domain[ItemIdentifier(path)], "\(path)")
        }
        #expect(try store.partiallyPresent(domainID: id, among: paths.map { ItemIdentifier($0) }) == domain)
        #expect(try store.partiallyPresent(domainID: id, among: [ItemIdentifier("q"), ItemIdentifier("t")]) == [ItemIdentifier("q"): 300])
        #expect(try store.partiallyPresent(domainID: id, among: []) == [:])
        // Fewer partly present files than the page: one pass over the ranges, matched with the page.
        #expect(
            try store.partiallyPresent(domainID: id, among: ["t", "r", "s", "u", "v"].map { ItemIdentifier($0) }) == [
                ItemIdentifier("r"): 300
            ])
        let other = try #require(
            try store.insertDomain(DomainRecord(name: "e", backendKind: "local", configuration: [:], replicaPath: "/e")).id)
        try store.apply(domainID: other, upserts: paths.map { item($0, domainID: other) }, deletions: [])
        #expect(try store.partiallyPresent(domainID: other, among: paths.map { ItemIdentifier($0) }) == [:])
        #expect(try store.stalePartials(domainID: id).map(\.path) == ["r"])
    }
    @Test func aFolderReKeyedInStagesReplacesItsSubtreeAtOnceAndOnlyThen() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        let store = try MetadataStore(url: url)
        let id = try #require(
            try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r")).id)
        let otherDomain = try #require(
            try store.insertDomain(DomainRecord(name: "o", backendKind: "local", configuration: [:], replicaPath: "/o")).id)
        try store.apply(
            domainID: id,
            upserts: [
                item("d", domainID: id, kind: .folder), item("d/a", domainID: id), item("d/b", domainID: id), item("d-x", domainID: id),
            ],
            deletions: [])
        let counted = try store.itemCount(domainID: id)
        try store.beginRekey(domainID: id)
        try store.beginRekey(domainID: otherDomain)
        try store.stageRekeyed(domainID: otherDomain, [item("o", domainID: otherDomain)])
        try store.stageRekeyed(domainID: id, [item("e", domainID: id, kind: .folder)])
        try store.stageRekeyed(domainID: id, [item("e/a", domainID: id), item("e/b", domainID: id)])
        // Staged rows are no one's until the end: not this store's reads, not another connection's.
        let other = try MetadataStore(url: url)
        for reader in [store, other] {
            #expect(try reader.descendants(domainID: id, of: "d").map(\.path) == ["d/a", "d/b"])
            #expect(try reader.item(domainID: id, path: "e") == nil)
        }
        try store.finishRekey(domainID: id, path: "d")
        #expect(try other.item(domainID: id, path: "d") == nil)
        #expect(try other.descendants(domainID: id, of: "d").isEmpty)
        #expect(try other.descendants(domainID: id, of: "e").map(\.path) == ["e/a", "e/b"])
        #expect(try other.item(domainID: id, path: "d-x") != nil)
        #expect(try other.itemCount(domainID: id) == counted, "the counters follow")
        // Another domain's staged rows wait for its own end.
        #expect(try other.item(domainID: otherDomain, path: "o") == nil)
        try store.finishRekey(domainID: otherDomain, path: "none")
        #expect(try other.item(domainID: otherDomain, path: "o") != nil)
        // A re-keying that never finished (its process killed) is forgotten by the next one.
        try store.beginRekey(domainID: id)
        try store.stageRekeyed(domainID: id, [item("left", domainID: id)])
        try store.beginRekey(domainID: id)
        try store.stageRekeyed(domainID: id, [item("f", domainID: id, kind: .folder), item("f/a", domainID: id)])
        try store.finishRekey(domainID: id, path: "e")
        #expect(try store.item(domainID: id, path: "left") == nil)
        #expect(try store.descendants(domainID: id, of: "").map(\.path) == ["d-x", "f", "f/a"])
    }
}
