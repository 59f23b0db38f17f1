import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// ``JournalBatch``'s group commit: creations' results are written `gathered` at a time (or
/// when the batch closes), any other result at once with those queued; nothing is written
/// before its write, and every entry is done once its result is.
@Suite struct JournalBatchTests {
    /// A file record at `path`, its identifier the path.
    func file(_ domainID: Int64, _ path: String) -> ItemRecord {
        let item = Item(
            identifier: ItemIdentifier(path), parentIdentifier: .rootContainer, filename: path, kind: .file, size: 1,
            contentModificationDate: Date(timeIntervalSince1970: 1_700_000_000),
            version: ItemVersion(content: Data([1]), metadata: Data([1])))
        return ItemRecord(domainID: domainID, item: item, path: path)
    }

    /// A database in `folder` with one domain, and the domain's id.
    func storeWithDomain(in folder: TemporaryFolder) throws -> (MetadataStore, Int64) {
        let store = try MetadataStore(url: folder.url("metadata.sqlite"))
        let domain = try store.insertDomain(
            DomainRecord(name: "d", backendKind: "test", configuration: ["root": "/x"], replicaPath: folder.path + "/r"))
        return (store, try #require(domain.id))
    }

    @Test func creationsAreWrittenGatheredAndOtherResultsAtOnce() async throws {
        let temp = try TemporaryFolder()
        defer { temp.remove() }
        let (store, domainID) = try storeWithDomain(in: temp)
        let executor = BlockingExecutor(name: "journal-batch-test", threads: 1)
        let writes = Mutex<[[String]]>([])
        let batch = JournalBatch(
            store: store, executor: executor, gathered: 3,
            afterWrite: { records in writes.withLock { $0.append(records.map(\.path)) } })
        let keys = ["create:a", "create:b", "create:c", "create:d", "modify:e", "create:f"]
        try await batch.open(
            keys.map { JournalEntry(domainID: domainID, templateIdentifier: $0, operation: String($0.prefix { $0 != ":" }), payload: "{}") }
        )
        func finish(_ key: String) async throws {
            let entry = try #require(batch.take(key)?.entry)
            let path = String(key.drop { $0 != ":" }.dropFirst())
            await batch.finish(entry, saving: file(domainID, path), isNew: entry.operation == "create")
        }
        try await finish("create:a")
        try await finish("create:b")
        // Two creations of three: held, not written, their entries still running.
        #expect(writes.withLock { $0 }.isEmpty)
        #expect(try store.item(domainID: domainID, path: "a") == nil)
        #expect(try store.unfinishedOperations(domainID: domainID).count == keys.count)
        try await finish("create:c")
        #expect(writes.withLock { $0 } == [["a", "b", "c"]])
        #expect(try store.item(domainID: domainID, path: "c") != nil)
        try await finish("create:d")
        // An edit is never held: written at once, with the creation queued before it.
        try await finish("modify:e")
        #expect(writes.withLock { $0 } == [["a", "b", "c"], ["d", "e"]])
        try await finish("create:f")
        #expect(try store.item(domainID: domainID, path: "f") == nil)
        try await batch.close()
        #expect(writes.withLock { $0 } == [["a", "b", "c"], ["d", "e"], ["f"]])
        #expect(try store.unfinishedOperations(domainID: domainID).isEmpty)
        #expect(batch.refused().isEmpty)
    }

    @Test func aNewItemWhoseIdentifierAnotherHoldsIsRefusedInItsWrite() async throws {
        let temp = try TemporaryFolder()
        defer { temp.remove() }
        let (store, domainID) = try storeWithDomain(in: temp)
        try store.save(file(domainID, "b"))
        let batch = JournalBatch(store: store, executor: BlockingExecutor(name: "journal-batch-test", threads: 1), gathered: 2)
        try await batch.open(
            ["create:a", "create:c"].map { JournalEntry(domainID: domainID, templateIdentifier: $0, operation: "create", payload: "{}") })
        var lying = file(domainID, "a")
        lying.identifier = ItemIdentifier("b")
        await batch.finish(try #require(batch.take("create:a")?.entry), saving: lying, isNew: true)
        await batch.finish(try #require(batch.take("create:c")?.entry), saving: file(domainID, "c"), isNew: true)
        try await batch.close()
        #expect(batch.refused().map(\.path) == ["a"] && batch.refused().first?.error.code == .corruptData)
        #expect(try store.item(domainID: domainID, path: "a") == nil)
        #expect(try store.item(domainID: domainID, path: "b")?.path == "b", "the other item keeps its record")
        #expect(try store.item(domainID: domainID, path: "c") != nil)
        #expect(try store.unfinishedOperations(domainID: domainID).map(\.templateIdentifier) == ["create:a"])
    }
}
