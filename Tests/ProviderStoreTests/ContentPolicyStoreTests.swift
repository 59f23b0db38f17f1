import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

/// Migration "v8": pins become content policies; present ranges, last use and settings.
@Suite struct ContentPolicyStoreTests {
    func item(_ id: String, domainID: Int64, path: String) -> ItemRecord {
        ItemRecord(
            domainID: domainID,
            item: Item(
                identifier: ItemIdentifier(id), parentIdentifier: .rootContainer, filename: path, kind: .file,
                contentType: "public.data", size: 10, version: ItemVersion(content: Data([1]), metadata: Data([1]))),
            path: path)
    }

    @Test func aPinnedItemOfAnOldDatabaseBecomesEagerAndOthersInherit() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        let queue = try DatabaseQueue(path: url.path)
        try Migrations.migrator.migrate(queue, upTo: "v7: replica modes")
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO domain (name, backendKind, configuration, replicaPath, createdAt)
                    VALUES ('old', 'local', '{}', '/r/old', '2026-01-02 03:04:05.000')
                    """)
            for (id, pinned) in [("a", true), ("b", false)] {
                try db.execute(
                    sql: """
                        INSERT INTO item (domainID, identifier, parentIdentifier, filename, path, kind, contentType, size,
                          contentVersion, metadataVersion, capabilities, state, isPinned)
                        VALUES (1, ?, 'root', ?, ?, 'file', 'public.data', 1, x'01', x'01', 0, 'placeholder', ?)
                        """, arguments: [id, id, id, pinned])
            }
        }
        try queue.close()

        let store = try MetadataStore(url: url)
        let domain = try #require(try store.domain(named: "old"))
        #expect(domain.hydration == .full)
        #expect(domain.cacheBudget == nil)
        #expect(try store.item(domainID: 1, path: "a")?.contentPolicy == .eager)
        #expect(try store.item(domainID: 1, path: "a")?.isPinned == true)
        #expect(try store.item(domainID: 1, path: "b")?.contentPolicy == nil)
        #expect(try store.summary(domainID: 1).pinned == 1)
    }

    @Test func policiesRoundTripAndAnUnknownOneKeepsTheContents() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let store = try MetadataStore(url: folder.path("metadata.sqlite"))
        let domain = try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r"))
        let id = try #require(domain.id)
        var records: [ItemRecord] = []
        for (index, policy) in ContentPolicy.allCases.enumerated() {
            var record = item("i\(index)", domainID: id, path: "p\(index)")
            record.contentPolicy = policy
            records.append(record)
        }
        try store.apply(domainID: id, upserts: records, deletions: [])
        for record in records { #expect(try store.item(domainID: id, path: record.path)?.contentPolicy == record.contentPolicy) }
        try store.write { db in try db.execute(sql: "UPDATE item SET contentPolicy = 'from-the-future' WHERE path = 'p0'") }
        #expect(try store.item(domainID: id, path: "p0")?.contentPolicy == .eager)
    }

    @Test func rangesMergeAndAreOfOneContentVersion() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let store = try MetadataStore(url: folder.path("metadata.sqlite"))
        let domain = try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r"))
        let id = try #require(domain.id)
        let file = ItemIdentifier("f")
        let v1 = Data([1])
        #expect(try store.addPresentRange(0..<1, domainID: id, identifier: file, contentVersion: v1) == nil)
        try store.apply(domainID: id, upserts: [item("f", domainID: id, path: "f")], deletions: [])
        try store.addPresentRange(0..<10, domainID: id, identifier: file, contentVersion: v1)
        try store.addPresentRange(20..<30, domainID: id, identifier: file, contentVersion: v1)
        #expect(try store.presentRanges(domainID: id, identifier: file, contentVersion: v1) == [0..<10, 20..<30])
        try store.addPresentRange(10..<20, domainID: id, identifier: file, contentVersion: v1)
        #expect(try store.presentRanges(domainID: id, identifier: file, contentVersion: v1) == [0..<30])
        #expect(try store.partiallyPresent(domainID: id) == [file: 30])
        // Another version: the old ranges are stale, and the next record drops them.
        #expect(try store.presentRanges(domainID: id, identifier: file, contentVersion: Data([2])) == [])
        #expect(try store.addPresentRange(5..<6, domainID: id, identifier: file, contentVersion: Data([2])) == nil)
        var changed = item("f", domainID: id, path: "f")
        changed.contentVersion = Data([2])
        try store.apply(domainID: id, upserts: [changed], deletions: [])
        try store.addPresentRange(5..<6, domainID: id, identifier: file, contentVersion: Data([2]))
        #expect(try store.presentRanges(domainID: id, identifier: file, contentVersion: v1) == [])
        #expect(try store.partiallyPresent(domainID: id) == [file: 1])
        try store.removePresentRanges(domainID: id, identifier: file)
        #expect(try store.partiallyPresent(domainID: id) == [:])
        // Deleting the item forgets its ranges.
        try store.addPresentRange(0..<3, domainID: id, identifier: file, contentVersion: Data([2]))
        try store.apply(domainID: id, upserts: [], deletions: [file])
        #expect(try store.partiallyPresent(domainID: id) == [:])
    }

    @Test func lastUseAndSettings() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let store = try MetadataStore(url: folder.path("metadata.sqlite"))
        let domain = try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r"))
        let id = try #require(domain.id)
        #expect(try store.lastUse(domainID: id, identifier: ItemIdentifier("x")) == nil)
        try store.recordUse(domainID: id, identifiers: [ItemIdentifier("x")], at: Date(timeIntervalSince1970: 100))
        #expect(try store.lastUse(domainID: id, identifier: ItemIdentifier("x")) == Date(timeIntervalSince1970: 100))
        #expect(try store.setting("cacheBudget") == nil)
        try store.setSetting("cacheBudget", "1000")
        #expect(try store.setting("cacheBudget") == "1000")
        try store.setSetting("cacheBudget", nil)
        #expect(try store.setting("cacheBudget") == nil)
    }
}
