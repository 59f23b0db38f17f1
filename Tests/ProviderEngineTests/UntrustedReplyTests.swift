import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Replies the engine does not take on trust: a create or a change answered with another item,
/// a download whose bytes are not those of the content hash the store sent with them. Each is
/// `corruptData`; nothing is recorded, the local file stays as it is.
@Suite struct UntrustedReplyTests: ReplicaEditing {
    /// A store over the fixture's memory that answers creates and changes with the item at
    /// `answer` (a path), and downloads with `hash` as the item's content hash.
    final class LyingStore: ForwardingBackend, @unchecked Sendable {
        let memory: MemoryBackend
        var answer: String?
        let keepsName: Bool
        let hash: String?
        /// Downloads come with another content version than the listing's.
        var sendsAnotherVersion = false
        var forwardee: any Backend { memory }

        init(memory: MemoryBackend, answer: String? = nil, keepsName: Bool = false, hash: String? = nil) {
            (self.memory, self.answer, self.keepsName, self.hash) = (memory, answer, keepsName, hash)
        }

        func close() async {}

        func lie(_ result: ItemResult) async throws(FileProviderError) -> ItemResult {
            guard let answer else { return result }
            var other = try await memory.item(for: ItemIdentifier(answer))
            // The other item's identity under the name asked for: only the identifier lies.
            if keepsName { other.filename = result.item.filename }
            return ItemResult(item: other)
        }

        func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
            async throws(FileProviderError) -> ItemResult
        {
            try await lie(try await memory.createItem(basedOn: template, fields: fields, contents: contents, options: options))
        }

        func modifyItem(_ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions)
            async throws(FileProviderError) -> ItemResult
        {
            // A lying store keeps the bytes under a date a second later than the file's: sync
            // down must not take the store's version for the engine's own download. (With the
            // file's date, it can: the date goes up as a `Date` and comes back to within a few
            // hundred nanoseconds, sometimes exactly, and then the store's version of the same
            // size and date is rightly recognised as this file, which it is.)
            var item = item
            if answer != nil { item.contentModificationDate = item.contentModificationDate?.addingTimeInterval(1) }
            return try await lie(
                try await memory.modifyItem(
                    item, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options))
        }

        func fetchContents(
            for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
        ) async throws(FileProviderError) -> Item {
            var item = try await memory.fetchContents(
                for: identifier, version: version, to: destination, offset: offset, progress: progress)
            item.contentHash = hash
            if sendsAnotherVersion { item.version = ItemVersion(content: Data("another".utf8), metadata: item.version.metadata) }
            return item
        }

        func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
            var results: [Result<Item, FileProviderError>] = []
            for request in requests {
                do {
                    results.append(
                        .success(
                            try await fetchContents(
                                for: request.identifier, version: request.version, to: request.destination, offset: request.offset,
                                progress: nil)))
                } catch {
                    results.append(.failure(error))
                }
            }
            return results
        }
    }

    static let otherFile = Data("the other file".utf8)

    @Test(arguments: [false, true])
    func aCreationAnsweredWithAnotherItemIsNotRecorded(keepsName: Bool) async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "b.txt", data: Self.otherFile)
            f.remote.serve(through: LyingStore(memory: f.memory, answer: "b.txt", keepsName: keepsName))
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("mine".utf8), f, controller, "a.txt")
            let report = try await controller.sync()
            #expect(report.uploaded == 0)
            #expect(report.notices.contains { $0.contains("a.txt") && $0.contains("nothing was recorded") }, "\(report.notices)")
            #expect(try Data(contentsOf: controller.replica.url("a.txt")) == Data("mine".utf8), "the local file stays")
            let other = try controller.record(at: "b.txt")
            #expect(other.identifier.rawValue == "b.txt" && other.state == .placeholder, "the other item keeps its record")
            #expect(f.memory.contents(of: "b.txt") == Self.otherFile)
            // Never recorded as this file's download (the store's own a.txt, listed since, is a
            // placeholder beside it): an eviction leaves its only copy alone.
            #expect((try? controller.record(at: "a.txt"))?.state != .materialized)
            _ = await controller.evict(paths: ["a.txt"], recursive: false)
            #expect(try Data(contentsOf: controller.replica.url("a.txt")) == Data("mine".utf8))
        }
    }

    @Test func anEditAnsweredWithAnotherItemIsNotRecorded() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.txt", data: Data("one".utf8))
            try f.memory.write(path: "b.txt", data: Self.otherFile)
            let store = LyingStore(memory: f.memory)
            f.remote.serve(through: store)
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["a.txt"], recursive: false)) == [nil])
            store.answer = "b.txt"
            try write(Data("edited".utf8), f, controller, "a.txt")
            let report = try await controller.sync()
            #expect(report.uploaded == 0)
            #expect(report.notices.contains { $0.contains("a.txt") && $0.contains("nothing was recorded") }, "\(report.notices)")
            #expect(try Data(contentsOf: controller.replica.url("a.txt")) == Data("edited".utf8))
            #expect(try controller.record(at: "b.txt").identifier.rawValue == "b.txt")
            let evicted = await controller.evict(paths: ["a.txt"], recursive: false)
            #expect(
                evicted.first?.error?.code == .unsyncedEdits,
                "\(evicted) \((try? controller.record(at: "a.txt")).map { "\($0.state) \($0.version)" } ?? "no record")")
        }
    }

    @Test func aDownloadThatDoesNotMatchItsContentHashIsNotPlaced() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.txt", data: Data("hello".utf8))
            // A SHA-256, but not of "hello".
            let wrong = "sha256:5b0ad8a0c3e5ad3c6e5bf4a4a6a2fd6b37c10eddcc3b7c08fbaa1c28d6ad3be6"
            f.remote.serve(through: LyingStore(memory: f.memory, hash: wrong))
            let controller = try await f.addDomain()
            try await controller.sync()
            let outcome = try #require(await controller.materialize(paths: ["a.txt"], recursive: false).first)
            #expect(outcome.error?.code == .corruptData)
            #expect(outcome.error?.message.contains("does not match the store's hash") == true, "\(outcome.error?.message ?? "")")
            #expect(!FileManager.default.fileExists(atPath: controller.replica.path("a.txt")))
            #expect(try controller.record(at: "a.txt").state == .placeholder)
            // Fetched once more before it was reported, and no more.
            #expect(f.memory.bytesServed(by: .fetchContents) == 2 * Int64("hello".utf8.count))
            #expect(try controller.record(at: "a.txt").lastError?.contains("does not match the store's hash") == true)
            // And every program sees it on the file standing for the item.
            #expect(ReplicaStatus.read(atPath: controller.replica.placeholderLocation("a.txt")) == .error)
        }
    }

    @Test func aDownloadThatMatchesItsContentHashIsPlaced() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.txt", data: Data("hello".utf8))
            let right = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
            f.remote.serve(through: LyingStore(memory: f.memory, hash: right))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["a.txt"], recursive: false)) == [nil])
            #expect(try Data(contentsOf: controller.replica.url("a.txt")) == Data("hello".utf8))
            // The store's hash is the one computed as the bytes were written: recorded beside it.
            let record = try controller.record(at: "a.txt")
            #expect(record.contentHash == right && record.sha256 == String(right.dropFirst("sha256:".count)))
            var report = try await f.manager.verify()
            #expect(report.verified == 1 && report.problems.isEmpty, "\(report)")

            // The store now describes the same version with another hash (its copy changed
            // without a new version): verify says the store's copy differs, offline.
            var differs = record
            differs.contentHash = "sha256:" + String(repeating: "0", count: 64)
            let (store, domainID) = (f.manager.store, record.domainID)
            try store.apply(domainID: domainID, upserts: [differs], deletions: [])
            report = try await f.manager.verify()
            #expect(report.problems.map(\.kind) == [.storeHashDiffers] && report.verified == 1, "\(report)")
            #expect(report.problems.first?.storeHash == differs.contentHash && report.problems.first?.recordedHash == right)
        }
    }

    /// A listing with two items of one identifier: the first is taken, the second skipped with
    /// a notice (the database would keep one record, the replica both placeholders).
    @Test func aSecondItemWithTheSameIdentifierIsSkipped() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            var twin = try await f.memory.item(for: ItemIdentifier("a.txt"))
            twin.filename = "twin.txt"
            f.remote.inject([twin], into: .rootContainer)
            let report = try await controller.sync()
            #expect(report.notices.contains { $0.contains("\"twin.txt\" has the identifier") }, "\(report.notices)")
            #expect(try controller.record(at: "a.txt").identifier.rawValue == "a.txt")
            #expect((try? controller.record(at: "twin.txt")) == nil)
            #expect(tree(at: controller.replica.root).filter { !$0.hasPrefix(".") } == ["a.txt.placeholder"])
        }
    }

    /// A store that lists one version and sends another: each sync downloads the file again,
    /// and says so.
    @Test func aDownloadOfAnotherVersionThanListedIsANotice() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let store = LyingStore(memory: f.memory)
            store.sendsAnotherVersion = true
            f.remote.serve(through: store)
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["a.txt"], recursive: false)) == [nil])
            let report = try await controller.sync()
            #expect(report.downloaded == 1)
            #expect(report.notices.contains { $0.contains("a.txt") && $0.contains("another version than it listed") }, "\(report.notices)")
            store.sendsAnotherVersion = false
            _ = try await controller.sync()
            let quiet = try await controller.sync()
            #expect(quiet.downloaded == 0 && quiet.notices.isEmpty, "\(quiet.notices)")
        }
    }
}
