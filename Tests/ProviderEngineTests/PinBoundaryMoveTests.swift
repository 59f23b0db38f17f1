import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A folder the store moves (the same identifier, ``OpaqueIdentifierBackend``) into a pinned
/// folder or out of one: sync down moves its local copy, its downloaded file stays downloaded
/// (the walk lists it at its old path, its copy already at the new one), and the statuses of
/// both follow (`pinned`, `downloaded`).
@Suite struct PinBoundaryMoveTests {
    /// Moves the item at `path` of `store` into the folder at `folder` (another client's move).
    static func move(_ path: String, into folder: String, of store: OpaqueIdentifierBackend) async throws {
        let item = try await store.item(for: ItemIdentifier(try #require(store.identifier(of: path))))
        var moved = item
        moved.parentIdentifier = ItemIdentifier(try #require(store.identifier(of: folder)))
        _ = try await store.modifyItem(
            moved, baseVersion: item.version, changedFields: .parentItemIdentifier, contents: nil, options: [])
    }

    @Test func aFolderMovedInTheStoreAcrossAPinTakesItsStatusAlong() async throws {
        try await ReplacedItemTests.withOpaqueStore { f, store in
            _ = try f.memory.mkdir(path: "a")
            _ = try f.memory.mkdir(path: "a/sub")
            _ = try f.memory.mkdir(path: "p")
            _ = try f.memory.write(path: "a/sub/f.txt", data: Data("alpha".utf8))
            let controller = try await f.addDomain(mode: .placeholderFiles)
            try await controller.sync()
            #expect(codes(await controller.pin(paths: ["p"])).allSatisfy { $0 == nil })
            #expect(codes(await controller.materialize(paths: ["a/sub/f.txt"], recursive: false)) == [nil])
            let identifier = try controller.record(at: "a/sub").identifier
            func status(_ path: String) -> ReplicaStatus? { ReplicaStatus.read(atPath: controller.replica.path(path)) }
            #expect(status("a/sub") == .downloaded && status("a/sub/f.txt") == .downloaded)

            try await Self.move("a/sub", into: "p", of: store)
            try await controller.sync()
            #expect(try controller.record(at: "p/sub").identifier == identifier, "a move, not a new item")
            #expect(try controller.record(at: "p/sub/f.txt").state == .materialized)
            #expect(status("p/sub") == .pinned)
            #expect(status("p/sub/f.txt") == .pinned)

            try await Self.move("p/sub", into: "a", of: store)
            try await controller.sync()
            #expect(try controller.record(at: "a/sub").identifier == identifier)
            #expect(try controller.record(at: "a/sub/f.txt").state == .materialized)
            #expect(status("a/sub") == .downloaded)
            #expect(status("a/sub/f.txt") == .downloaded)
        }
    }
}
