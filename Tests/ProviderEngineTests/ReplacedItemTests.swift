import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A store that replaces an item by a new one of the same name (deleted, then made again: a new
/// identifier at the same path, as Nextcloud's web interface or another client does) loses
/// nothing: the new item takes the old one's place in the replica, nothing is sent back, and
/// local edits of the old one are kept beside the new one. Over a store whose identifiers are
/// its own (``OpaqueIdentifierBackend``).
@Suite struct ReplacedItemTests: ReplicaEditing {
    /// A fixture whose domain talks to an ``OpaqueIdentifierBackend`` over its memory store.
    static func withOpaqueStore(_ body: (Fixture, OpaqueIdentifierBackend) async throws -> Void) async throws {
        try await Fixture.with { f in
            let store = OpaqueIdentifierBackend(memory: f.memory)
            f.remote.serve(through: store)
            try await body(f, store)
        }
    }

    /// Syncs three times (the first brings the change down, the next two would send whatever it
    /// left wrong back up) and checks that nothing was deleted or sent.
    static func settle(_ f: Fixture, _ controller: DomainController, sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> [SyncReport]
    {
        var reports: [SyncReport] = []
        for _ in 0..<3 { reports.append(try await controller.sync()) }
        #expect(f.memory.callCount(.deleteItem) == 0, "nothing is deleted in the store", sourceLocation: sourceLocation)
        #expect(
            reports.dropFirst().allSatisfy { $0.uploaded == 0 && $0.added == 0 && $0.deleted == 0 },
            "\(reports.map { ($0.uploaded, $0.added, $0.deleted, $0.notices) })", sourceLocation: sourceLocation)
        #expect(reports.allSatisfy { $0.notices.isEmpty }, "\(reports.flatMap(\.notices))", sourceLocation: sourceLocation)
        return reports
    }

    @Test(arguments: [ReplicaMode.placeholderFiles, .dataless])
    func aReplacedFileThatWasNotDownloadedIsTheNewItemsPlaceholder(mode: ReplicaMode) async throws {
        try await Self.withOpaqueStore { f, store in
            try f.memory.write(path: "a.txt", data: Data("one".utf8))
            let controller = try await f.addDomain(mode: mode)
            try await controller.sync()
            let first = try controller.record(at: "a.txt").identifier
            try store.replace(path: "a.txt", data: Data("second one".utf8))
            let reports = try await Self.settle(f, controller)
            #expect(reports[0].deleted == 0, "a replaced item is no deletion: \(reports[0])")
            let record = try controller.record(at: "a.txt")
            #expect(record.identifier.rawValue == store.identifier(of: "a.txt"))
            #expect(record.identifier != first)
            #expect(record.state == .placeholder && record.size == 10)
            #expect(controller.replica.isPlaceholder(of: record.identifier, at: "a.txt"))
            #expect(f.memory.contents(of: "a.txt") == Data("second one".utf8))
            #expect(codes(await controller.materialize(paths: ["a.txt"], recursive: false)) == [nil])
            #expect(try Data(contentsOf: controller.replica.url("a.txt")) == Data("second one".utf8))
        }
    }

    @Test func aReplacedFileThatWasDownloadedIsDownloadedAgain() async throws {
        try await Self.withOpaqueStore { f, store in
            try f.memory.write(path: "docs/a.txt", data: Data("one".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["docs/a.txt"], recursive: false)) == [nil])
            try store.replace(path: "docs/a.txt", data: Data("second one".utf8))
            let reports = try await Self.settle(f, controller)
            #expect(reports[0].downloaded == 1)
            let record = try controller.record(at: "docs/a.txt")
            #expect(record.identifier.rawValue == store.identifier(of: "docs/a.txt"))
            #expect(record.state == .materialized && !record.isOutdated)
            #expect(try Data(contentsOf: controller.replica.url("docs/a.txt")) == Data("second one".utf8))
            #expect(tree(at: controller.replica.root).filter { !$0.hasPrefix(".") } == ["docs/", "docs/a.txt"])
        }
    }

    /// Edited here while the store replaced it: both are kept, neither replaces the other.
    @Test func aLocalEditOfAReplacedFileIsKeptBesideTheNewItem() async throws {
        try await Self.withOpaqueStore { f, store in
            try f.memory.write(path: "a.txt", data: Data("one".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["a.txt"], recursive: false)) == [nil])
            try write(Data("mine".utf8), f, controller, "a.txt")
            try store.replace(path: "a.txt", data: Data("theirs".utf8))
            var reports: [SyncReport] = []
            for _ in 0..<3 { reports.append(try await controller.sync()) }
            #expect(f.memory.callCount(.deleteItem) == 0)
            #expect(f.memory.contents(of: "a.txt") == Data("theirs".utf8), "the store's new file stays")
            // Sent before the store's change came down: the old item is gone, so the edit is
            // made again beside the store's new file (here `a 2.txt`).
            let names = try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path).filter {
                !$0.hasPrefix(".") && !$0.hasSuffix(".placeholder")
            }
            let copy = try #require(names.first { $0 != "a.txt" }, "\(names)")
            #expect(f.memory.contents(of: copy) == Data("mine".utf8), "the local edit goes up beside it")
            #expect(try Data(contentsOf: controller.replica.url(copy)) == Data("mine".utf8))
            #expect(controller.replica.placeholderExists("a.txt"))
            #expect(reports.last.map { $0.uploaded == 0 && $0.conflicts == 0 } == true)
        }
    }

    /// A folder deleted and made again with files of the same names: what was in the old one
    /// becomes what is in the new one; nothing is deleted on either side.
    @Test func aReplacedFolderKeepsItsPlaceAndItsItems() async throws {
        try await Self.withOpaqueStore { f, store in
            try f.memory.write(path: "docs/x.txt", data: Data("x".utf8))
            try f.memory.write(path: "docs/sub/y.txt", data: Data("y".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["docs/x.txt"], recursive: false)) == [nil])
            try store.replaceFolder(path: "docs", files: ["x.txt": Data("x2".utf8), "z.txt": Data("z".utf8)])
            let reports = try await Self.settle(f, controller)
            #expect(reports[0].deleted == 2, "only docs/sub and docs/sub/y.txt went: \(reports[0])")
            #expect(f.memory.contents(of: "docs/x.txt") == Data("x2".utf8))
            #expect(f.memory.contents(of: "docs/z.txt") == Data("z".utf8))
            let folder = try controller.record(at: "docs")
            #expect(folder.identifier.rawValue == store.identifier(of: "docs"))
            for name in ["x.txt", "z.txt"] {
                let record = try controller.record(at: "docs/" + name)
                #expect(record.parentIdentifier == folder.identifier)
                #expect(record.identifier.rawValue == store.identifier(of: "docs/" + name))
            }
            #expect(try Data(contentsOf: controller.replica.url("docs/x.txt")) == Data("x2".utf8))
            #expect(controller.replica.placeholderExists("docs/z.txt"))
            #expect(!FileManager.default.fileExists(atPath: controller.replica.path("docs/sub")))
        }
    }

    /// A store that hands out new identifiers at every listing: the items stay, nothing moves
    /// onto itself, nothing is sent.
    @Test func aStoreThatRenewsIdentifiersAtEveryListingLosesNothing() async throws {
        try await Self.withOpaqueStore { f, store in
            try f.memory.write(path: "a.txt", data: Data("a".utf8))
            try f.memory.write(path: "docs/b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["docs/b.txt"], recursive: false)) == [nil])
            store.renewsEveryListing = true
            _ = try await Self.settle(f, controller)
            #expect(f.memory.contents(of: "a.txt") == Data("a".utf8))
            #expect(controller.replica.placeholderExists("a.txt"))
            #expect(try Data(contentsOf: controller.replica.url("docs/b.txt")) == Data("b".utf8))
            #expect(try controller.record(at: "docs/b.txt").state == .materialized)
        }
    }
}
