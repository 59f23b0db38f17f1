import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Both sides changed the same item: keep both, never lose either (the conflict rows of the
/// two-way sync table), over MemoryBackend.
@Suite struct TwoWayConflictTests: ReplicaEditing {
    @Test func bothEditedKeepsBothVersions() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "doc.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["doc.txt"], recursive: false)
            _ = try f.memory.write(path: "doc.txt", data: Data("remote edit".utf8))
            try write(Data("local edit".utf8), f, controller, "doc.txt")
            let report = try await controller.sync()
            #expect(report.conflicts == 1)
            #expect(try Data(contentsOf: f.url(controller, "doc.txt")) == Data("remote edit".utf8))
            let names = try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path)
            let copy = try #require(names.first { $0.hasPrefix("doc (conflicted copy ") && $0.hasSuffix(".txt") })
            #expect(try Data(contentsOf: f.url(controller, copy)) == Data("local edit".utf8))
            #expect(f.memory.contents(of: copy) == Data("local edit".utf8), "the conflicted copy is uploaded")
            #expect(f.memory.contents(of: "doc.txt") == Data("remote edit".utf8))
            let logged = try f.manager.store.conflicts(domainID: controller.domainID)
            #expect(logged.map(\.kind) == ["bothEdited"])
            #expect(
                try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty,
                "a resolved conflict leaves nothing pending")
            #expect(try await controller.sync().conflicts == 0)
        }
    }

    /// The end of every "edited on both sides" scenario: the store's version keeps the name (here
    /// too), the local edit went up as a conflicted copy, one `bothEdited` is logged, nothing is
    /// left pending, and the next sync has nothing to do.
    func expectBothKept(
        _ f: Fixture, _ controller: DomainController, _ report: SyncReport, local: Data, remote: Data,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        #expect(report.conflicts == 1, "\(report.notices)", sourceLocation: sourceLocation)
        #expect(f.memory.contents(of: "doc.txt") == remote, "the store's edit survives", sourceLocation: sourceLocation)
        #expect(try Data(contentsOf: f.url(controller, "doc.txt")) == remote, sourceLocation: sourceLocation)
        let names = try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path)
        let copy = try #require(
            names.first { $0.hasPrefix("doc (conflicted copy ") && $0.hasSuffix(".txt") }, sourceLocation: sourceLocation)
        #expect(try Data(contentsOf: f.url(controller, copy)) == local, "the local edit survives", sourceLocation: sourceLocation)
        #expect(f.memory.contents(of: copy) == local, "the conflicted copy is uploaded", sourceLocation: sourceLocation)
        let logged = try f.manager.store.conflicts(domainID: controller.domainID)
        #expect(logged.map(\.kind) == ["bothEdited"], sourceLocation: sourceLocation)
        #expect(logged.first?.keptPath == copy, sourceLocation: sourceLocation)
        #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty, sourceLocation: sourceLocation)
        let again = try await controller.sync()
        #expect(again.conflicts == 0 && again.uploaded == 0, "\(again)", sourceLocation: sourceLocation)
        #expect(f.memory.contents(of: "doc.txt") == remote, sourceLocation: sourceLocation)
    }

    /// A downloaded file edited here, changed in the store, then a download-only sync (`sync
    /// --download-only`): sync down keeps the local file (it refuses to download over it) and
    /// records the store's new version. The edit is still based on the version that was
    /// downloaded, so the next sync keeps both. Sent as an edit of the store's new version, it
    /// silently replaced the store's edit. With and without a change feed.
    @Test(arguments: [false, true]) func anEditKeptByADownloadOnlySyncStillConflictsWithTheStoresEdit(feed: Bool) async throws {
        try await Fixture.with(memory: MemoryBackend(hasChangeFeed: feed, pageSize: 7)) { f in
            let (local, remote) = (Data("local edit".utf8), Data("remote edit, longer".utf8))
            _ = try f.memory.write(path: "doc.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["doc.txt"], recursive: false)) == [nil])
            try write(local, f, controller, "doc.txt")
            _ = try f.memory.write(path: "doc.txt", data: remote)
            let down = try await controller.sync(upload: false)
            #expect(down.uploaded == 0 && down.conflicts == 0)
            #expect(try Data(contentsOf: f.url(controller, "doc.txt")) == local, "sync down keeps the local edit")
            #expect(down.notices.contains { $0.contains("doc.txt") && $0.contains("local changes") }, "\(down.notices)")
            #expect(f.memory.contents(of: "doc.txt") == remote)
            try await expectBothKept(f, controller, try await controller.sync(), local: local, remote: remote)
        }
    }

    /// The same with the local edit made while sync down runs (after sync up found nothing to
    /// send, in a full sync), between the listing and the download of the store's version.
    @Test(arguments: [false, true]) func anEditMadeWhileSyncDownRunsStillConflictsWithTheStoresEdit(upload: Bool) async throws {
        try await Fixture.with { f in
            let (local, remote) = (Data("local edit".utf8), Data("remote edit, longer".utf8))
            _ = try f.memory.write(path: "doc.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["doc.txt"], recursive: false)) == [nil])
            _ = try f.memory.write(path: "doc.txt", data: remote)
            let url = f.url(controller, "doc.txt")
            let once = Once()
            f.memory.setHook(for: .enumerateItems) { _ in
                if await once.first() { try? local.write(to: url, options: .atomic) }
            }
            let down = try await controller.sync(upload: upload)
            f.memory.setHook(for: .enumerateItems, nil)
            #expect(await once.first() == false, "the edit was made during the sync")
            #expect(down.uploaded == 0 && down.conflicts == 0)
            #expect(try Data(contentsOf: url) == local, "sync down keeps the local edit")
            try await expectBothKept(f, controller, try await controller.sync(), local: local, remote: remote)
        }
    }

    @Test func editedHereDeletedThereIsUploadedAgain() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "e.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["e.txt"], recursive: false)
            try f.memory.remove(path: "e.txt")
            try write(Data("kept".utf8), f, controller, "e.txt")
            try await controller.sync()
            #expect(f.memory.contents(of: "e.txt") == Data("kept".utf8))
            #expect(try Data(contentsOf: f.url(controller, "e.txt")) == Data("kept".utf8))
        }
    }

    @Test func deletedHereEditedThereComesBack() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "d.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try FileManager.default.removeItem(at: f.placeholderURL(controller, "d.txt"))
            _ = try f.memory.write(path: "d.txt", data: Data("edited there".utf8))
            try await controller.sync()
            #expect(f.memory.contents(of: "d.txt") == Data("edited there".utf8))
            let metadata = try placeholder(at: f.placeholderURL(controller, "d.txt"))
            #expect(metadata.size == Int64("edited there".utf8.count))
        }
    }

    /// A downloaded file the store changed while its local copy had edits: a download-only sync
    /// records the store's new version but keeps the local file. Deleted here then, alone or
    /// with its folder, it was deleted without its user ever seeing the store's version: that
    /// version comes back (`deletedAndEdited`), as when the store changes a file deleted here.
    @Test(arguments: ["file", "folder"]) func aDeletionOfAFileSyncDownKeptBackKeepsTheStoresEdit(deleting: String) async throws {
        try await Fixture.with { f in
            let remote = Data("remote edit, longer".utf8)
            _ = try f.memory.write(path: "d/doc.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["d/doc.txt"], recursive: false)) == [nil])
            try write(Data("local edit".utf8), f, controller, "d/doc.txt")
            _ = try f.memory.write(path: "d/doc.txt", data: remote)
            _ = try await controller.sync(upload: false)
            try FileManager.default.removeItem(at: f.url(controller, deleting == "file" ? "d/doc.txt" : "d"))
            let report = try await controller.sync()
            #expect(report.conflicts == 1, "\(report.notices)")
            #expect(f.memory.contents(of: "d/doc.txt") == remote, "the store's edit survives")
            #expect(try f.manager.store.conflicts(domainID: controller.domainID).map(\.kind) == ["deletedAndEdited"])
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty)
            #expect(try controller.record(at: "d/doc.txt").state == .placeholder)
            #expect(try placeholder(at: f.placeholderURL(controller, "d/doc.txt")).size == Int64(remote.count))
            let again = try await controller.sync()
            #expect(again.conflicts == 0 && again.uploaded == 0, "\(again)")
        }
    }
}

/// True the first time it is asked, false after.
private actor Once {
    private var asked = false

    func first() -> Bool {
        defer { asked = true }
        return !asked
    }
}
