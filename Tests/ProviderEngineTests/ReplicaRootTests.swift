import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A replica folder that is gone, or an empty folder in its place (a disk not mounted on its
/// mount point), is not a replica whose items were all deleted: a sync sends nothing.
@Suite struct ReplicaRootTests {
    func seed(_ f: Fixture) throws {
        _ = try f.memory.write(path: "a.txt", data: Data("a".utf8))
        _ = try f.memory.write(path: "docs/b.txt", data: Data("b".utf8))
    }

    func storeIsIntact(_ f: Fixture) -> Bool {
        f.memory.contents(of: "a.txt") == Data("a".utf8) && f.memory.contents(of: "docs/b.txt") == Data("b".utf8)
            && f.memory.callCount(.deleteItem) == 0
    }

    @Test func aMissingReplicaFolderSendsNothing() async throws {
        try await Fixture.with { f in
            try seed(f)
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a.txt"], recursive: false)
            try FileManager.default.removeItem(at: controller.replica.root)
            let error = await #expect(throws: FileProviderError.self) { try await controller.sync() }
            #expect(error?.code == .providerDomainTemporarilyUnavailable)
            #expect(error?.message.contains("is missing") == true, "\(error?.message ?? "")")
            #expect(storeIsIntact(f))
            let unsent = await #expect(throws: FileProviderError.self) { try await f.manager.unsentChanges(inDomain: "mem") }
            #expect(unsent?.code == .providerDomainTemporarilyUnavailable, "nothing is listed as deleted either")
        }
    }

    /// What an unmounted disk looks like: the mount point is there, empty, without the mark.
    @Test func anEmptyFolderInPlaceOfTheReplicaSendsNothing() async throws {
        try await Fixture.with { f in
            try seed(f)
            let controller = try await f.addDomain()
            try await controller.sync()
            try FileManager.default.removeItem(at: controller.replica.root)
            try FileManager.default.createDirectory(at: controller.replica.root, withIntermediateDirectories: false)
            let error = await #expect(throws: FileProviderError.self) { try await controller.sync() }
            #expect(error?.message.contains("is empty and was not made by this domain") == true, "\(error?.message ?? "")")
            #expect(storeIsIntact(f))
            #expect(try f.manager.domain(named: "mem").lastError?.contains("is empty") == true, "status shows why")
        }
    }

    /// Emptying a real replica is deleting its items: that goes to the store.
    @Test func everythingDeletedInsideTheReplicaIsDeletedInTheStore() async throws {
        try await Fixture.with { f in
            try seed(f)
            let controller = try await f.addDomain()
            try await controller.sync()
            for name in try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path) {
                try FileManager.default.removeItem(at: controller.replica.url(name))
            }
            try await controller.sync()
            #expect(f.memory.contents(of: "a.txt") == nil && f.memory.contents(of: "docs/b.txt") == nil)
        }
    }

    /// A replica made before folders were marked holds its items: its first sync marks it, so
    /// emptying it later is taken as deletions again.
    @Test func anUnmarkedReplicaThatHoldsItsItemsIsMarkedAndSynced() async throws {
        try await Fixture.with { f in
            try seed(f)
            let controller = try await f.addDomain()
            try await controller.sync()
            // The same contents in a folder without the mark.
            let root = controller.replica.root
            let aside = root.deletingLastPathComponent().appendingPathComponent("aside")
            try FileManager.default.moveItem(at: root, to: aside)
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: false)
            for name in try FileManager.default.contentsOfDirectory(atPath: aside.path) {
                try FileManager.default.moveItem(at: aside.appendingPathComponent(name), to: root.appendingPathComponent(name))
            }
            let report = try await controller.sync()
            #expect(report.uploaded == 0)
            #expect(storeIsIntact(f))
            try FileManager.default.removeItem(at: controller.replica.url("a.txt.placeholder"))
            try FileManager.default.removeItem(at: controller.replica.url("docs"))
            try await controller.sync()
            #expect(f.memory.contents(of: "a.txt") == nil, "the folder is this domain's replica now")
        }
    }
}
