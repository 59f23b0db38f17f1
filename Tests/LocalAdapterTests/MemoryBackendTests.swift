import Foundation
import ProviderCore
import ProviderTesting
import Testing

@Suite("MemoryBackend")
struct MemoryBackendTests {
    func drain(_ backend: MemoryBackend, from anchor: SyncAnchor, in container: ItemIdentifier = .workingSet)
        async throws -> (updated: [Item], deleted: [ItemIdentifier], calls: Int)
    {
        var updated: [Item] = []
        var deleted: [ItemIdentifier] = []
        var current = anchor
        var calls = 0
        while true {
            let changes = try await backend.enumerateChanges(in: container, from: current)
            calls += 1
            updated += changes.updatedItems
            deleted += changes.deletedIdentifiers
            current = changes.newAnchor
            if !changes.moreComing { return (updated, deleted, calls) }
        }
    }

    @Test func remoteChangesAppearInTheFeed() async throws {
        let backend = MemoryBackend()
        try backend.write(path: "docs/a.txt", data: Data("a".utf8))
        let anchor = try await backend.currentSyncAnchor(for: .workingSet)
        try backend.write(path: "docs/b.txt", data: Data("b".utf8))
        try backend.write(path: "docs/a.txt", data: Data("a2".utf8))
        try backend.mkdir(path: "pics/2024")
        let changes = try await drain(backend, from: anchor)
        let ids = Set(changes.updated.map(\.identifier.rawValue))
        #expect(ids == ["docs/b.txt", "docs/a.txt", "pics", "pics/2024"])
        #expect(changes.deleted.isEmpty)
        #expect(backend.contents(of: "docs/a.txt") == Data("a2".utf8))
        // Parents come before children.
        let order = changes.updated.map(\.identifier.rawValue)
        #expect(order.firstIndex(of: "pics")! < order.firstIndex(of: "pics/2024")!)
    }

    @Test func remoteRenameOfAFolderReKeysItsChildren() async throws {
        let backend = MemoryBackend()
        try backend.write(path: "old/x.txt", data: Data("x".utf8))
        let anchor = try await backend.currentSyncAnchor(for: .workingSet)
        try backend.rename(from: "old", to: "new")
        let changes = try await drain(backend, from: anchor)
        #expect(Set(changes.deleted.map(\.rawValue)) == ["old", "old/x.txt"])
        #expect(Set(changes.updated.map(\.identifier.rawValue)) == ["new", "new/x.txt"])
        #expect(try await backend.item(for: "new/x.txt").parentIdentifier == "new")
    }

    @Test func removalsAppearAsDeletions() async throws {
        let backend = MemoryBackend()
        try backend.write(path: "f/1", data: Data())
        try backend.write(path: "f/2", data: Data())
        let anchor = try await backend.currentSyncAnchor(for: .rootContainer)
        try backend.remove(path: "f")
        let changes = try await drain(backend, from: anchor, in: .rootContainer)
        #expect(changes.deleted.map(\.rawValue) == ["f"])
        let all = try await drain(backend, from: anchor)
        #expect(Set(all.deleted.map(\.rawValue)) == ["f", "f/1", "f/2"])
    }

    @Test func changesComeInBatches() async throws {
        let backend = MemoryBackend(changeBatchSize: 2)
        let anchor = try await backend.currentSyncAnchor(for: .workingSet)
        for index in 0..<7 { try backend.write(path: "file\(index)", data: Data()) }
        let changes = try await drain(backend, from: anchor)
        #expect(changes.updated.count == 7)
        #expect(changes.calls == 4)
    }

    @Test func expiredAnchorsAreRefused() async throws {
        let backend = MemoryBackend()
        let anchor = try await backend.currentSyncAnchor(for: .workingSet)
        try backend.write(path: "a", data: Data())
        backend.expireAnchors()
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateChanges(in: .workingSet, from: anchor)
        }
        #expect(error?.code == .syncAnchorExpired)
        let fresh = try await backend.currentSyncAnchor(for: .workingSet)
        #expect(try await drain(backend, from: fresh).updated.isEmpty)
    }

    @Test func anchorsOlderThanTheLogExpire() async throws {
        let backend = MemoryBackend(changeLogLimit: 3)
        let anchor = try await backend.currentSyncAnchor(for: .workingSet)
        for index in 0..<5 { try backend.write(path: "n\(index)", data: Data()) }
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateChanges(in: .workingSet, from: anchor)
        }
        #expect(error?.code == .syncAnchorExpired)
    }

    @Test func anchorsOfAnotherStoreAreRefused() async throws {
        let one = MemoryBackend()
        let other = MemoryBackend()
        let anchor = try await one.currentSyncAnchor(for: .workingSet)
        let error = await #expect(throws: FileProviderError.self) {
            try await other.enumerateChanges(in: .workingSet, from: anchor)
        }
        #expect(error?.code == .syncAnchorExpired)
    }

    @Test func injectedFailuresRunOutAndCallsAreCounted() async throws {
        let backend = MemoryBackend()
        try backend.write(path: "a", data: Data("a".utf8))
        backend.setFailure(FileProviderError(.serverUnreachable, "down"), for: .item, times: 2)
        for _ in 0..<2 {
            let error = await #expect(throws: FileProviderError.self) { try await backend.item(for: "a") }
            #expect(error?.code == .serverUnreachable)
        }
        #expect(try await backend.item(for: "a").size == 1)
        #expect(backend.callCount(.item) == 3)

        backend.setFailure(FileProviderError(.insufficientQuota, "full"), for: .createItem)
        let template = Item.template(identifier: "t", parent: .rootContainer, filename: "b", kind: .folder)
        for _ in 0..<3 {
            await #expect(throws: FileProviderError.self) {
                try await backend.createItem(basedOn: template, fields: [], contents: nil, options: [])
            }
        }
        backend.setFailure(nil, for: .createItem)
        _ = try await backend.createItem(basedOn: template, fields: [], contents: nil, options: [])
        #expect(backend.allIdentifiers.map(\.rawValue) == ["a", "b"])
    }

    @Test func hooksRunBeforeOperations() async throws {
        let backend = MemoryBackend()
        try backend.write(path: "a", data: Data("abc".utf8))
        let seen = Recorder<String>()
        backend.setHook(for: .fetchContents) { identifier in seen.add(identifier?.rawValue ?? "") }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("memory-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data().write(to: url)
        _ = try await backend.fetchContents(for: "a", version: nil, to: url, offset: 0, progress: nil)
        #expect(seen.values == ["a"])
        #expect(try Data(contentsOf: url) == Data("abc".utf8))
        backend.setHook(for: .fetchContents, nil)
        _ = try await backend.fetchContents(for: "a", version: nil, to: url, offset: 0, progress: nil)
        #expect(seen.values == ["a"])
    }

    @Test func withoutChangeFeedAnchorsAreNotSupported() async throws {
        let backend = MemoryBackend(hasChangeFeed: false)
        #expect(!backend.capabilities.hasChangeFeed)
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.currentSyncAnchor(for: .workingSet)
        }
        #expect(error?.code == .notSupported)
    }

    @Test func conformanceRunAllReportsNoFailures() async {
        let failures = await BackendConformance(makeBackend: { MemoryBackend(pageSize: 7) }).runAll()
        #expect(failures.isEmpty, "\(failures)")
    }
}
