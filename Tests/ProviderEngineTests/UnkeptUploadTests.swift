import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A store that answers an upload and then does not keep it: the next listing lacks the new
/// file, or shows the version from before the edit. The local bytes are the only copy: they are
/// kept, never removed or downloaded over, and sent again.
@Suite struct UnkeptUploadTests: ReplicaEditing {
    /// A store over the fixture's memory that answers creates and edits as done, then forgets
    /// them (`forgets`): a create is removed again, an edit is undone.
    final class ForgetfulStore: ForwardingBackend, @unchecked Sendable {
        let memory: MemoryBackend
        var forgets = true
        var forwardee: any Backend { memory }
        init(memory: MemoryBackend) { self.memory = memory }

        func close() async {}

        func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
            async throws(FileProviderError) -> ItemResult
        {
            let result = try await memory.createItem(basedOn: template, fields: fields, contents: contents, options: options)
            if forgets && result.item.kind == .file { try memory.remove(path: result.item.identifier.rawValue) }
            return result
        }

        func modifyItem(_ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions)
            async throws(FileProviderError) -> ItemResult
        {
            let before = memory.contents(of: item.identifier.rawValue)
            let result = try await memory.modifyItem(
                item, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options)
            if forgets, let before { try memory.write(path: result.item.identifier.rawValue, data: before) }
            return result
        }
    }

    /// With a listing of the whole store, and with a change feed.
    static func memory(feed: Bool) -> MemoryBackend { MemoryBackend(hasChangeFeed: feed, pageSize: 7) }

    @Test(arguments: [false, true])
    func aNewFileTheStoreDidNotKeepIsKeptAndSentAgain(feed: Bool) async throws {
        try await Fixture.with(memory: Self.memory(feed: feed)) { f in
            let store = ForgetfulStore(memory: f.memory)
            f.remote.serve(through: store)
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("only copy".utf8), f, controller, "new.txt")
            let first = try await controller.sync()
            #expect(first.uploaded == 1)
            #expect(first.notices.contains { $0.contains("new.txt") && $0.contains("no longer lists it") }, "\(first.notices)")
            #expect(try Data(contentsOf: controller.replica.url("new.txt")) == Data("only copy".utf8), "never removed")
            store.forgets = false
            let second = try await controller.sync()
            #expect(second.uploaded == 1)
            #expect(f.memory.contents(of: "new.txt") == Data("only copy".utf8), "sent again, kept this time")
            #expect(try controller.record(at: "new.txt").state == .materialized)
            let third = try await controller.sync()
            #expect(third.uploaded == 0 && third.notices.isEmpty, "\(third.notices)")
        }
    }

    @Test(arguments: [false, true])
    func anEditTheStoreDidNotKeepIsKeptBesideItsVersion(feed: Bool) async throws {
        try await Fixture.with(memory: Self.memory(feed: feed)) { f in
            try f.memory.write(path: "a.txt", data: Data("one".utf8))
            let store = ForgetfulStore(memory: f.memory)
            store.forgets = false
            f.remote.serve(through: store)
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["a.txt"], recursive: false)) == [nil])
            store.forgets = true
            try write(Data("the edit, longer".utf8), f, controller, "a.txt")
            let first = try await controller.sync()
            #expect(first.uploaded == 1)
            #expect(first.notices.contains { $0.contains("a.txt") && $0.contains("another version") }, "\(first.notices)")
            #expect(try Data(contentsOf: controller.replica.url("a.txt")) == Data("the edit, longer".utf8), "not downloaded over")
            store.forgets = false
            _ = try await controller.sync()
            _ = try await controller.sync()
            // Both kept: the store's version under its name, the edit beside it.
            #expect(f.memory.contents(of: "a.txt") == Data("one".utf8))
            let names = try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path).filter { !$0.hasPrefix(".") }
            let copy = try #require(names.first { $0.hasPrefix("a (conflicted copy ") }, "\(names)")
            #expect(f.memory.contents(of: copy) == Data("the edit, longer".utf8))
        }
    }

    /// An upload the next listing shows as it was sent is confirmed: a later deletion in the
    /// store is an ordinary one.
    @Test func aConfirmedUploadDeletedInTheStoreIsRemoved() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("kept".utf8), f, controller, "new.txt")
            _ = try await controller.sync()
            #expect(f.memory.contents(of: "new.txt") == Data("kept".utf8))
            try f.memory.remove(path: "new.txt")
            let report = try await controller.sync()
            #expect(report.deleted == 1 && report.notices.isEmpty, "\(report.notices)")
            #expect(!FileManager.default.fileExists(atPath: controller.replica.path("new.txt")))
        }
    }
}
