import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

/// What the policy resolver reads (issue #18: memory that does not grow with the number of
/// pinned files): the folders' explicit policies only, the folders above one path, and the
/// files set online-only themselves a page at a time.
@Suite struct FolderPoliciesStoreTests {
    func item(_ path: String, domainID: Int64, kind: ItemKind = .file, policy: ContentPolicy? = nil) -> ItemRecord {
        let parent = path.split(separator: "/").dropLast().joined(separator: "/")
        var record = ItemRecord(
            domainID: domainID,
            item: Item(
                identifier: path.isEmpty ? .rootContainer : ItemIdentifier(path),
                parentIdentifier: parent.isEmpty ? .rootContainer : ItemIdentifier(parent),
                filename: String(path.split(separator: "/").last ?? ""), kind: kind, contentType: "public.data", size: 10,
                version: ItemVersion(content: Data([1]), metadata: Data([1]))),
            path: path)
        record.contentPolicy = policy
        return record
    }

    func store(_ folder: TemporaryFolder) throws -> (MetadataStore, Int64) {
        let store = try MetadataStore(url: folder.path("metadata.sqlite"))
        let id = try #require(
            try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r")).id)
        return (store, id)
    }

    @Test func theResolversLoadReturnsFolderRowsOnly() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (store, id) = try store(folder)
        var records = [
            item("", domainID: id, kind: .folder, policy: .lazy),
            item("a", domainID: id, kind: .folder, policy: .eager),
            item("a/b", domainID: id, kind: .folder, policy: .onlineOnly),
            item("a/b/c", domainID: id, kind: .folder),
            item("a/b/c/own.txt", domainID: id, policy: .eager),
            item("a/link", domainID: id, kind: .symlink, policy: .onlineOnly),
            item("z", domainID: id, kind: .folder),
        ]
        // Many files pinned one by one: none of them is loaded.
        for index in 0..<500 { records.append(item("z/pinned-\(index)", domainID: id, policy: .eager)) }
        try store.apply(domainID: id, upserts: records, deletions: [])

        #expect(try store.explicitFolderPolicies(domainID: id) == ["": .lazy, "a": .eager, "a/b": .onlineOnly])
        #expect(try store.explicitPolicies(domainID: id).count == 505)
        // Along one path: the root and the folders above it, the path itself when a folder.
        #expect(
            try store.explicitFolderPolicies(domainID: id, along: "a/b/c/own.txt") == ["": .lazy, "a": .eager, "a/b": .onlineOnly])
        #expect(try store.explicitFolderPolicies(domainID: id, along: "a/b") == ["": .lazy, "a": .eager, "a/b": .onlineOnly])
        #expect(try store.explicitFolderPolicies(domainID: id, along: "a") == ["": .lazy, "a": .eager])
        #expect(try store.explicitFolderPolicies(domainID: id, along: "a/link") == ["": .lazy, "a": .eager])
        #expect(try store.explicitFolderPolicies(domainID: id, along: "z/pinned-1") == ["": .lazy])
        #expect(try store.explicitFolderPolicies(domainID: id, along: "") == ["": .lazy])
        // "a b" sorts between "a" and "a/": not above "a b/x".
        #expect(try store.explicitFolderPolicies(domainID: id, along: "a b/x") == ["": .lazy])

        #expect(try store.hasExplicitPolicy(.onlineOnly, domainID: id))
        #expect(try !store.hasExplicitPolicy(.evictOnRemoteUpdate, domainID: id))
    }

    @Test func filesSetOnlineOnlyThemselvesThatHoldContentsComeInPages() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (store, id) = try store(folder)
        var records = [item("", domainID: id, kind: .folder), item("f", domainID: id, kind: .folder, policy: .onlineOnly)]
        var expected: [String] = []
        for index in 0..<7 {
            var file = item("o\(index)", domainID: id, policy: .onlineOnly)
            if index % 3 != 2 {
                file.state = .materialized
                file.localSize = Int64(100 + index)
                expected.append(file.path)
            }
            records.append(file)
        }
        // Materialized, but inheriting or with another policy of its own: not these.
        var inherits = item("f/x", domainID: id)
        inherits.state = .materialized
        var pinned = item("p", domainID: id, policy: .eager)
        pinned.state = .materialized
        records += [inherits, pinned, item("partial", domainID: id, policy: .onlineOnly)]
        try store.apply(domainID: id, upserts: records, deletions: [])
        try store.addPresentRange(0..<4, domainID: id, identifier: ItemIdentifier("partial"), contentVersion: Data([1]))
        expected.append("partial")

        for limit in [1, 2, 3, 100] {
            var found: [EvictionCandidate] = []
            var after: String?
            var pages = 0
            repeat {
                let page = try store.filesHoldingContents(domainID: id, ownPolicy: .onlineOnly, after: after, limit: limit)
                #expect(page.candidates.count <= limit)
                found += page.candidates
                after = page.next
                pages += 1
            } while after != nil && pages < 100
            #expect(found.map(\.path).sorted() == expected.sorted(), "limit \(limit)")
            #expect(found.allSatisfy { $0.contentPolicy == .onlineOnly })
            #expect(found.first { $0.path == "o1" }.map { ($0.bytes, $0.isPartial) } ?? (0, true) == (101, false))
            #expect(found.first { $0.path == "partial" }.map { ($0.bytes, $0.isPartial) } ?? (0, false) == (4, true))
        }
        // The candidates of a subtree bring each file's own policy.
        let below = try store.evictionCandidates(domainID: id, below: "")
        #expect(below.first { $0.path == "p" }?.contentPolicy == .eager)
        #expect(below.first { $0.path == "f/x" }.map { $0.contentPolicy == nil } == true)
    }

    /// The rows of one policy are one range of `item_policy` (v15): looking for a policy
    /// nobody set reads none of the rows of the others.
    @Test func oneValueOfAPolicyIsOneRangeOfItsIndex() throws {
        try withStore { store, _ in
            let plan = try store.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        EXPLAIN QUERY PLAN SELECT identifier FROM item INDEXED BY item_policy
                        WHERE domainID = 1 AND contentPolicy = 'online-only' AND identifier > 'a' ORDER BY identifier
                        """
                ).map { $0["detail"] as String }.joined(separator: "\n")
            }
            #expect(plan.contains("item_policy (domainID=? AND contentPolicy=? AND identifier>?)"), "\(plan)")
            #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
            let folders = try store.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        EXPLAIN QUERY PLAN SELECT path FROM item INDEXED BY item_folder_policy
                        WHERE domainID = 1 AND contentPolicy IS NOT NULL AND (kind = 'folder' OR path = '')
                        """
                ).map { $0["detail"] as String }.joined(separator: "\n")
            }
            #expect(folders.contains("item_folder_policy (domainID=?)"), "\(folders)")
        }
    }
}
