import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Local changes go up, conflicts keep both, errors back off: one scenario per row of the
/// two-way sync table, over MemoryBackend.
@Suite struct TwoWaySyncTests {
    func write(_ data: Data, _ f: Fixture, _ controller: DomainController, _ path: String) throws {
        let url = f.url(controller, path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url, options: .atomic)
    }

    func exists(_ f: Fixture, _ controller: DomainController, _ path: String) -> Bool {
        FileManager.default.fileExists(atPath: f.url(controller, path).path)
    }

    @Test func localCreationsAreUploadedOnce() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("new".utf8), f, controller, "docs/new.txt")
            try write(Data("deep".utf8), f, controller, "docs/sub/deep.bin")
            let report = try await controller.sync()
            #expect(report.uploaded == 4)
            #expect(f.memory.contents(of: "docs/new.txt") == Data("new".utf8))
            #expect(f.memory.contents(of: "docs/sub/deep.bin") == Data("deep".utf8))
            #expect(try controller.record(at: "docs/new.txt").state == .materialized)
            let again = try await controller.sync()
            #expect(again.uploaded == 0)
            #expect(again.added == 0 && again.updated == 0 && again.deleted == 0)
            #expect(f.memory.callCount(.createItem) == 4)
        }
    }

    @Test func localEditsAreUploadedWithTheirBaseVersion() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.txt", data: Data("one".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a.txt"], recursive: false)
            try write(Data("two!".utf8), f, controller, "a.txt")
            let report = try await controller.sync()
            #expect(report.uploaded == 1)
            #expect(report.conflicts == 0)
            #expect(f.memory.contents(of: "a.txt") == Data("two!".utf8))
            let record = try controller.record(at: "a.txt")
            #expect(record.state == .materialized && !record.isOutdated)
            // Evicting is allowed again: nothing unsynced.
            #expect(codes(await controller.evict(paths: ["a.txt"], recursive: false)) == [nil])
        }
    }

    /// `echo line3 >> log.txt` where only `log.txt.placeholder` is: the writer never saw the
    /// item's contents, so the store's version keeps the name and the file goes up beside it.
    @Test func aFileWrittenAtTheNameOfANotDownloadedItemIsKeptBesideIt() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "log.txt", data: Data("line1\nline2\n".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            // What `>>` does: the name does not exist (only its placeholder), so a new file.
            #expect(FileManager.default.createFile(atPath: f.url(controller, "log.txt").path, contents: Data("line3\n".utf8)))
            let report = try await controller.sync()
            #expect(report.conflicts == 1)
            #expect(f.memory.contents(of: "log.txt") == Data("line1\nline2\n".utf8), "the store's contents are never replaced")
            #expect(f.memory.callCount(.modifyItem) == 0)
            let names = try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path)
            let copy = try #require(names.first { $0.hasPrefix("log (conflicted copy ") && $0.hasSuffix(".txt") })
            #expect(f.memory.contents(of: copy) == Data("line3\n".utf8), "the written file goes up as a conflicted copy")
            #expect(names.contains("log.txt.placeholder") && !names.contains("log.txt"))
            #expect(try controller.record(at: "log.txt").state == .placeholder)
            let logged = try f.manager.store.conflicts(domainID: controller.domainID)
            #expect(logged.map(\.kind) == ["overwrotePlaceholder"])
            #expect(logged.first?.keptPath == copy)
            let again = try await controller.sync()
            #expect(again.uploaded == 0 && again.conflicts == 0)
            // The store's version can still be downloaded under its name.
            #expect(codes(await controller.materialize(paths: ["log.txt"], recursive: false)) == [nil])
            #expect(try Data(contentsOf: f.url(controller, "log.txt")) == Data("line1\nline2\n".utf8))
        }
    }

    @Test func aFileWrittenInPlaceOfARemovedPlaceholderIsKeptBesideTheItem() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "p.txt", data: Data("remote".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try FileManager.default.removeItem(at: f.placeholderURL(controller, "p.txt"))
            try write(Data("local".utf8), f, controller, "p.txt")
            let report = try await controller.sync()
            #expect(report.conflicts == 1)
            #expect(f.memory.contents(of: "p.txt") == Data("remote".utf8))
            #expect(FileManager.default.fileExists(atPath: f.placeholderURL(controller, "p.txt").path), "the item's placeholder is back")
            let names = try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path)
            let copy = try #require(names.first { $0.hasPrefix("p (conflicted copy ") })
            #expect(f.memory.contents(of: copy) == Data("local".utf8))
        }
    }

    @Test func renamesAndMovesAreRecognisedByInode() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a/file.txt", data: Data("content".utf8))
            _ = try f.memory.write(path: "a/other.txt", data: Data("other".utf8))
            _ = try f.memory.mkdir(path: "b")
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a/file.txt"], recursive: false)
            try FileManager.default.moveItem(at: f.url(controller, "a/file.txt"), to: f.url(controller, "b/renamed.txt"))
            let report = try await controller.sync()
            #expect(report.uploaded == 1)
            #expect(f.memory.contents(of: "a/file.txt") == nil)
            #expect(f.memory.contents(of: "b/renamed.txt") == Data("content".utf8))
            #expect(f.memory.callCount(.createItem) == 0, "a move must not upload the contents again")
            let moved = try controller.record(at: "b/renamed.txt")
            #expect(moved.state == .materialized)
            #expect(try await controller.sync().uploaded == 0)

            // A folder moved with a placeholder and a materialized file inside.
            try FileManager.default.moveItem(at: f.url(controller, "a"), to: f.url(controller, "b/a-moved"))
            try await controller.sync()
            #expect(f.memory.contents(of: "b/a-moved/other.txt") == Data("other".utf8))
            #expect(try controller.record(at: "b/a-moved/other.txt").state == .placeholder)
            #expect(try await controller.sync().uploaded == 0)
        }
    }

    @Test func aMovedPlaceholderMovesTheItem() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "x.txt", data: Data("x".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try FileManager.default.moveItem(at: f.placeholderURL(controller, "x.txt"), to: f.placeholderURL(controller, "y.txt"))
            try await controller.sync()
            #expect(f.memory.contents(of: "x.txt") == nil)
            #expect(f.memory.contents(of: "y.txt") == Data("x".utf8), "moving a placeholder must never delete the item")
        }
    }

    @Test func aPlaceholderMovedAwayWithANewFileInItsPlaceIsAMoveAndACreation() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "old.txt", data: Data("remote bytes".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try FileManager.default.moveItem(at: f.placeholderURL(controller, "old.txt"), to: f.placeholderURL(controller, "kept.txt"))
            try write(Data("a new file".utf8), f, controller, "old.txt")
            try await controller.sync()
            #expect(f.memory.contents(of: "kept.txt") == Data("remote bytes".utf8), "the moved placeholder's item must survive")
            #expect(f.memory.contents(of: "old.txt") == Data("a new file".utf8))
            #expect(tree(at: controller.replica.root) == ["kept.txt.placeholder", "old.txt"])
        }
    }

    @Test func aPlaceholderMovedBeforeItsFolderMoveWasSentStillMovesItsItem() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a/x.txt", data: Data("x".utf8))
            _ = try f.memory.write(path: "a/y.txt", data: Data("y".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            // The folder moves (identifiers below it change), and a placeholder that still names
            // the old identifier moves out of it before the folder move is sent.
            try FileManager.default.moveItem(at: f.url(controller, "a"), to: f.url(controller, "b"))
            try FileManager.default.moveItem(at: f.placeholderURL(controller, "b/x.txt"), to: f.placeholderURL(controller, "x moved.txt"))
            try await controller.sync()
            #expect(f.memory.contents(of: "x moved.txt") == Data("x".utf8), "moving a placeholder must never delete the item")
            #expect(f.memory.contents(of: "b/y.txt") == Data("y".utf8))
            #expect(
                try placeholder(at: f.placeholderURL(controller, "b/y.txt")).identifier == "b/y.txt",
                "re-keyed placeholders carry their new identifiers")
            #expect(tree(at: controller.replica.root) == ["b/", "b/y.txt.placeholder", "x moved.txt.placeholder"])
        }
    }

    @Test func placeholdersNoItemOwnsAreRemovedAndNeverUploaded() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            // A copy of a placeholder, and a file named like a placeholder that is not one.
            try FileManager.default.copyItem(at: f.placeholderURL(controller, "a.txt"), to: f.placeholderURL(controller, "copy.txt"))
            try write(Data("not json".utf8), f, controller, "mine.placeholder")
            let report = try await controller.sync()
            #expect(report.uploaded == 0)
            #expect(f.memory.contents(of: "a.txt") == Data("a".utf8))
            #expect(tree(at: controller.replica.root) == ["a.txt.placeholder", "mine.placeholder"], "a user's own file is never removed")
        }
    }

    @Test func aFileWrittenAtTheNameOfAnItemDeletedThereGoesUpUnderItsName() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "p.txt", data: Data("remote".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("written over the placeholder".utf8), f, controller, "p.txt")
            try f.memory.remove(path: "p.txt")
            let report = try await controller.sync()
            #expect(report.conflicts == 0)
            #expect(f.memory.contents(of: "p.txt") == Data("written over the placeholder".utf8))
            #expect(tree(at: controller.replica.root) == ["p.txt"])
            #expect(try controller.record(at: "p.txt").state == .materialized)
        }
    }

    /// A creation the store refused did nothing, so its next attempt is no replay: with
    /// `mayAlreadyExist` it would overwrite what someone else put at the name meanwhile.
    @Test func aCreationTheStoreRefusedIsSentAfreshNotReplayedOverAnotherFile() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "d/keep.txt", data: Data("keep".utf8))
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 1000)
            try write(Data("mine".utf8), f, controller, "d/a.txt")
            // Someone deletes the folder in the store: the creation is refused (no parent).
            try f.memory.remove(path: "d")
            let first = try await controller.sync()
            #expect(first.uploaded == 0)
            let refused = try f.manager.store.unfinishedOperations(domainID: controller.domainID)
            #expect(refused.map(\.state) == [.failed])
            // Then someone else makes the folder again with their own a.txt.
            _ = try f.memory.write(path: "d/a.txt", data: Data("theirs".utf8))
            let second = try await controller.sync()
            #expect(f.memory.contents(of: "d/a.txt") == Data("theirs".utf8), "the other writer's file is never overwritten")
            #expect(f.memory.contents(of: "d/a 2.txt") == Data("mine".utf8), "ours goes up beside it")
            #expect(second.conflicts == 1)
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty)
        }
    }

    @Test func anEvictionNotYetRecordedIsNotADeletion() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "e.txt", data: Data("evict me".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["e.txt"], recursive: false)
            // What evict leaves between its replica step and its database step (another process
            // evicting, or one killed right there): the placeholder, no file, a materialized row.
            let record = try controller.record(at: "e.txt")
            try FileManager.default.removeItem(at: f.url(controller, "e.txt"))
            var evicted = record
            evicted.state = .placeholder
            try Data(PlaceholderMetadata(domain: controller.domain.name, record: evicted).encoded).write(
                to: f.placeholderURL(controller, "e.txt"))
            #expect(try controller.record(at: "e.txt").state == .materialized)
            let report = try await controller.sync()
            #expect(report.uploaded == 0)
            #expect(f.memory.contents(of: "e.txt") == Data("evict me".utf8), "an eviction must never delete the item")
            #expect(try controller.record(at: "e.txt").state == .placeholder)
        }
    }

    @Test func localDeletionsReachTheStore() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "gone.txt", data: Data("1".utf8))
            _ = try f.memory.write(path: "placeholder.txt", data: Data("2".utf8))
            _ = try f.memory.write(path: "dir/inside.txt", data: Data("3".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["gone.txt"], recursive: false)
            try FileManager.default.removeItem(at: f.url(controller, "gone.txt"))
            try FileManager.default.removeItem(at: f.placeholderURL(controller, "placeholder.txt"))
            try FileManager.default.removeItem(at: f.url(controller, "dir"))
            try await controller.sync()
            #expect(f.memory.contents(of: "gone.txt") == nil)
            #expect(f.memory.contents(of: "placeholder.txt") == nil)
            #expect(f.memory.contents(of: "dir/inside.txt") == nil)
            #expect(try controller.list(at: "", recursive: true).isEmpty)
        }
    }

    /// Items moved out of a folder that is then deleted are moves, not deletions and new
    /// uploads: the scan does not hold a missing folder's records during its walk, and reads
    /// them again to pair them with what turned up elsewhere.
    @Test func itemsMovedOutOfADeletedFolderAreMoves() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "old/sub/kept.txt", data: Data("kept".utf8))
            _ = try f.memory.write(path: "old/sub/placeholder.txt", data: Data("p".utf8))
            _ = try f.memory.write(path: "old/gone.txt", data: Data("g".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["old/sub/kept.txt"], recursive: false)
            try FileManager.default.moveItem(at: f.url(controller, "old/sub/kept.txt"), to: f.url(controller, "kept.txt"))
            try FileManager.default.moveItem(
                at: f.placeholderURL(controller, "old/sub/placeholder.txt"), to: f.placeholderURL(controller, "placeholder.txt"))
            try FileManager.default.removeItem(at: f.url(controller, "old"))
            try await controller.sync()
            #expect(f.memory.contents(of: "kept.txt") == Data("kept".utf8))
            #expect(f.memory.contents(of: "placeholder.txt") == Data("p".utf8), "moving a placeholder must never delete the item")
            #expect(f.memory.contents(of: "old/gone.txt") == nil)
            #expect(f.memory.callCount(.createItem) == 0, "a move must not upload the contents again")
            #expect(tree(at: controller.replica.root) == ["kept.txt", "placeholder.txt.placeholder"])
            #expect(try await controller.sync().uploaded == 0)
        }
    }

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

    @Test func aNameTakenInTheStoreGetsANumber() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = try f.memory.write(path: "same.txt", data: Data("theirs".utf8))
            try write(Data("mine".utf8), f, controller, "same.txt")
            try await controller.sync()
            #expect(f.memory.contents(of: "same.txt") == Data("theirs".utf8))
            #expect(f.memory.contents(of: "same 2.txt") == Data("mine".utf8))
            #expect(try Data(contentsOf: f.url(controller, "same 2.txt")) == Data("mine".utf8))
            #expect(try f.manager.store.conflicts(domainID: controller.domainID).map(\.kind) == ["nameCollision"])
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty)
        }
    }

    @Test func editorTemporaryFilesAndIgnoredNamesStayLocal() async throws {
        try await Fixture.with { f in
            try await f.manager.addDomain(name: "ig", kind: "memory", options: ["store": f.remoteName], ignorePatterns: ["*.log"])
            let controller = try await f.manager.controller(for: "ig")
            try await controller.sync()
            for name in [".doc.txt.swp", ".#lock", "~$report.docx", "scratch.tmp", "build.log", "backup~"] {
                try write(Data("x".utf8), f, controller, name)
            }
            try write(Data("real".utf8), f, controller, "real.txt")
            let report = try await controller.sync()
            #expect(report.uploaded == 1)
            #expect(
                f.memory.allIdentifiers.map(\.rawValue).filter { !$0.isEmpty && $0 != ItemIdentifier.rootContainer.rawValue } == [
                    "real.txt"
                ])
        }
    }

    @Test func temporaryFilesOfADeadProcessAreRemovedAndNeverUploaded() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "d/a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("half a placeholder".utf8), f, controller, "d/.fp-tmp-abandoned")
            try await controller.sync()
            #expect(!exists(f, controller, "d/.fp-tmp-abandoned"))
            #expect(f.memory.contents(of: "d/.fp-tmp-abandoned") == nil)
        }
    }

    @Test func anOutageQueuesChangesAndTheyGoUpAfterwards() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("during outage".utf8), f, controller, "queued.txt")
            f.memory.setFailure(FileProviderError(.serverUnreachable, "connection refused"), for: .createItem)
            await expectCode(.serverUnreachable) { try await controller.sync() }
            #expect(try f.manager.domain(named: "mem").lastError?.contains("connection refused") == true)
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).map(\.operation) == ["create"])
            #expect(exists(f, controller, "queued.txt"))
            f.memory.setFailure(nil, for: .createItem)
            try await controller.sync()
            #expect(f.memory.contents(of: "queued.txt") == Data("during outage".utf8))
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty)
            #expect(try f.manager.domain(named: "mem").lastError == nil)
        }
    }

    @Test func aCreateInterruptedAfterTheStoreHadItIsReplayedWithoutDuplicate() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("payload".utf8), f, controller, "r.txt")
            // The first attempt reaches the store, then the "process dies" before recording it.
            f.memory.setHook(for: .createItem) { _ in }
            f.memory.setFailure(FileProviderError(.serverUnreachable, "connection lost after upload"), for: .createItem, times: 1)
            _ = try f.memory.write(path: "r.txt", data: Data("payload".utf8))
            await expectCode(.serverUnreachable) { try await controller.sync() }
            let pending = try f.manager.store.unfinishedOperations(domainID: controller.domainID)
            #expect(pending.map(\.templateIdentifier) == ["create:r.txt"])
            try await controller.sync()
            #expect(f.memory.contents(of: "r.txt") == Data("payload".utf8))
            #expect(try controller.record(at: "r.txt").state == .materialized)
            #expect(!exists(f, controller, "r 2.txt"), "a replay must not be mistaken for a name collision")
        }
    }

    @Test func aMoveInterruptedAfterTheStoreHadItIsAdoptedNotDuplicated() async throws {
        for kind in ["file", "placeholder", "folder"] {
            try await Fixture.with { f in
                _ = try f.memory.write(path: "d/a.txt", data: Data("moved".utf8))
                _ = try f.memory.write(path: "d/inner/b.txt", data: Data("inner".utf8))
                _ = try f.memory.mkdir(path: "e")
                let controller = try await f.addDomain()
                try await controller.sync()
                if kind == "file" { #expect(codes(await controller.materialize(paths: ["d/a.txt"], recursive: false)) == [nil]) }
                // A downloaded file inside the moved folder must follow it, not come back as a copy.
                if kind == "folder" { #expect(codes(await controller.materialize(paths: ["d/inner/b.txt"], recursive: false)) == [nil]) }
                let (from, to) = kind == "folder" ? ("d/inner", "e/inner") : ("d/a.txt", "e/a.txt")
                let local = kind == "placeholder" ? (Replica.placeholderSuffix) : ""
                try FileManager.default.moveItem(
                    at: URL(fileURLWithPath: f.url(controller, from).path + local),
                    to: URL(fileURLWithPath: f.url(controller, to).path + local))
                // The first attempt reaches the store, then the "process dies" before recording it.
                f.memory.setHook(for: .modifyItem) { _ in }
                f.memory.setFailure(FileProviderError(.serverUnreachable, "connection lost after the move"), for: .modifyItem, times: 1)
                _ = try f.memory.rename(from: from, to: to)
                await expectCode(.serverUnreachable) { try await controller.sync() }
                #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).map(\.operation) == ["move"], "\(kind)")
                let report = try await controller.sync()
                #expect(report.conflicts == 0, "\(kind): \(report.notices)")
                #expect(
                    f.memory.allIdentifiers.map(\.rawValue).sorted()
                        == (kind == "folder"
                            ? ["d", "d/a.txt", "e", "e/inner", "e/inner/b.txt"] : ["d", "d/inner", "d/inner/b.txt", "e", "e/a.txt"]),
                    "\(kind)")
                #expect(try f.manager.store.conflicts(domainID: controller.domainID).isEmpty, "\(kind)")
                if kind == "file" { #expect(try controller.record(at: "e/a.txt").state == .materialized) }
                if kind == "folder" { #expect(try controller.record(at: "e/inner/b.txt").state == .materialized) }
                #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty, "\(kind)")
            }
        }
    }

    /// The same on a local store, which reports the taken new name before the missing source.
    @Test func aMoveInterruptedAfterALocalStoreHadItIsAdoptedNotDuplicated() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-replay-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storeRoot = folder.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: storeRoot.appendingPathComponent("d/inner"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: storeRoot.appendingPathComponent("e"), withIntermediateDirectories: true)
        try Data("moved".utf8).write(to: storeRoot.appendingPathComponent("d/a.txt"))
        let manager = try ProviderManager(home: folder.appendingPathComponent("home"), registry: BackendRegistry([LocalBackend.descriptor]))
        try await manager.addDomain(name: "local", kind: "local", options: ["root": storeRoot.path])
        let controller = try await manager.controller(for: "local")
        try await controller.sync()
        #expect(codes(await controller.materialize(paths: ["d/a.txt"], recursive: false)) == [nil])
        let record = try controller.record(at: "d/a.txt")
        try FileManager.default.moveItem(at: controller.replica.url("d/a.txt"), to: controller.replica.url("e/a.txt"))
        // The first attempt moved the file in the store, then the process died.
        try FileManager.default.moveItem(at: storeRoot.appendingPathComponent("d/a.txt"), to: storeRoot.appendingPathComponent("e/a.txt"))
        var entry = JournalEntry(
            domainID: controller.domainID, templateIdentifier: "move:\(record.identifier.rawValue)", operation: "move", payload: "{}")
        entry.state = .running
        _ = try manager.store.journal(entry)
        let report = try await controller.sync()
        #expect(report.conflicts == 0, "\(report.notices)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: storeRoot.appendingPathComponent("e").path) == ["a.txt"])
        #expect(try controller.record(at: "e/a.txt").state == .materialized)
        #expect(try manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty)
        await manager.close()
    }

    /// A replayed edit meets the store ahead of its base version and downloads the store's
    /// bytes to tell its own first attempt from someone else's edit. A process that dies while
    /// comparing (here: the store goes away) must leave the edit a replay: the next sync finds
    /// its own upload, not a conflict (a conflicted copy of a file edited only here).
    @Test func aReplayedEditCutShortWhileComparingIsStillNoConflict() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "doc.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["doc.txt"], recursive: false)) == [nil])
            try write(Data("local edit".utf8), f, controller, "doc.txt")
            // The first attempt reaches the store, then the "process dies" before recording it.
            f.memory.setFailure(FileProviderError(.serverUnreachable, "connection lost after the upload"), for: .modifyItem, times: 1)
            _ = try f.memory.write(path: "doc.txt", data: Data("local edit".utf8))
            await expectCode(.serverUnreachable) { try await controller.sync() }
            // The replay is refused (the store is ahead) and compares; it dies while comparing.
            f.memory.setFailure(FileProviderError(.serverUnreachable, "connection lost while comparing"), for: .fetchContents, times: 1)
            await expectCode(.serverUnreachable) { try await controller.sync() }
            let open = try f.manager.store.unfinishedOperations(domainID: controller.domainID)
            #expect(open.map(\.templateIdentifier) == ["modify:doc.txt"], "the edit is still a replay")
            let report = try await controller.sync()
            #expect(report.conflicts == 0, "\(report.notices)")
            #expect(try f.manager.store.conflicts(domainID: controller.domainID).isEmpty)
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: controller.replica.root.path).filter { !$0.hasPrefix(".") } == [
                    "doc.txt"
                ])
            #expect(f.memory.allIdentifiers.map(\.rawValue) == ["doc.txt"])
            #expect(f.memory.contents(of: "doc.txt") == Data("local edit".utf8))
            let record = try controller.record(at: "doc.txt")
            #expect(record.state == .materialized && !record.isOutdated)
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty)
            #expect(try await controller.sync().uploaded == 0, "the edit is recorded as sent")
        }
    }

    /// A replayed move meets its item gone from the old place and looks for it at the new one
    /// (a listing). A process that dies while looking (here: the store goes away) must leave
    /// the move a replay: else the next sync takes the item for deleted in the store and
    /// uploads it again at its new place, as `a 2.txt` beside itself (a folder: every file in it).
    @Test func aReplayedMoveCutShortWhileLookingForItsItemIsStillAdopted() async throws {
        for kind in ["file", "folder"] {
            try await Fixture.with { f in
                _ = try f.memory.write(path: "d/a.txt", data: Data("moved".utf8))
                _ = try f.memory.write(path: "d/inner/b.txt", data: Data("inner".utf8))
                _ = try f.memory.mkdir(path: "e")
                let controller = try await f.addDomain()
                try await controller.sync()
                let (from, to) = kind == "folder" ? ("d/inner", "e/inner") : ("d/a.txt", "e/a.txt")
                let materialized = kind == "folder" ? "d/inner/b.txt" : "d/a.txt"
                #expect(codes(await controller.materialize(paths: [materialized], recursive: false)) == [nil])
                try FileManager.default.moveItem(at: f.url(controller, from), to: f.url(controller, to))
                // The first attempt reaches the store, then the "process dies" before recording it.
                f.memory.setFailure(FileProviderError(.serverUnreachable, "connection lost after the move"), for: .modifyItem, times: 1)
                _ = try f.memory.rename(from: from, to: to)
                await expectCode(.serverUnreachable) { try await controller.sync() }
                // The replay finds the item gone and lists its new folder; it dies while listing.
                f.memory.setFailure(FileProviderError(.serverUnreachable, "connection lost while listing"), for: .enumerateItems, times: 1)
                await expectCode(.serverUnreachable) { try await controller.sync() }
                let open = try f.manager.store.unfinishedOperations(domainID: controller.domainID)
                #expect(open.map(\.operation) == ["move"], "\(kind): the move is still a replay")
                let report = try await controller.sync()
                #expect(report.conflicts == 0, "\(kind): \(report.notices)")
                #expect(
                    f.memory.allIdentifiers.map(\.rawValue)
                        == (kind == "folder"
                            ? ["d", "d/a.txt", "e", "e/inner", "e/inner/b.txt"] : ["d", "d/inner", "d/inner/b.txt", "e", "e/a.txt"]),
                    "\(kind): nothing uploaded twice")
                #expect(try f.manager.store.conflicts(domainID: controller.domainID).isEmpty, "\(kind)")
                let moved = kind == "folder" ? "e/inner/b.txt" : "e/a.txt"
                #expect(try controller.record(at: moved).state == .materialized, "\(kind)")
                #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty, "\(kind)")
                #expect(try await controller.sync().uploaded == 0, "\(kind)")
            }
        }
    }

    @Test func fieldsTheStoreLeavesPendingAreSentAgainLater() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            // A new file whose contents the store has not taken yet: the next sync sends them.
            try write(Data("contents".utf8), f, controller, "new.txt")
            f.remote.reportPending([.contents])
            #expect(try await controller.sync().uploaded == 1)
            let edits = f.memory.callCount(.modifyItem)
            #expect(try await controller.sync().uploaded == 1)
            #expect(f.memory.callCount(.modifyItem) == edits + 1, "the pending contents went again")
            #expect(try await controller.sync().uploaded == 0, "and then nothing is pending")

            // A move the store could not make yet is sent again by the next sync.
            try FileManager.default.moveItem(at: f.url(controller, "new.txt"), to: f.url(controller, "moved.txt"))
            f.remote.reportPending([.filename])
            try await controller.sync()
            #expect(f.memory.contents(of: "new.txt") != nil, "the store did not move it yet")
            let report = try await controller.sync()
            #expect(report.uploaded == 1 && report.conflicts == 0, "\(report)")
            #expect(f.memory.contents(of: "moved.txt") == Data("contents".utf8))
            #expect(f.memory.contents(of: "new.txt") == nil)
            #expect(try controller.record(at: "moved.txt").state == .materialized)
        }
    }

    @Test func manyNewFilesGoUpInBatchesAndAnOutageMidwayLosesNothing() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            let names = (0..<100).map { String(format: "f%03d.txt", $0) }
            for name in names { try write(Data(name.utf8), f, controller, name) }
            // The store goes away after 40 creations: the journal batches in flight are cut short.
            let calls = Recorder<ItemIdentifier?>()
            let memory = f.memory
            f.memory.setHook(for: .createItem) { identifier in
                if calls.add(identifier) == 40 {
                    memory.setFailure(FileProviderError(.serverUnreachable, "connection lost"), for: .createItem)
                }
            }
            await expectCode(.serverUnreachable) { try await controller.sync() }
            let uploaded = names.filter { f.memory.contents(of: $0) != nil }
            #expect(uploaded.count == 39)
            for name in uploaded { #expect(try controller.record(at: name).state == .materialized, "\(name) is recorded") }
            let unfinished = try f.manager.store.unfinishedOperations(domainID: controller.domainID)
            #expect(unfinished.count <= DomainController.uploadDepth, "only operations that started stay in the journal")
            #expect(unfinished.allSatisfy { $0.state == .pending && $0.operation == "create" })

            f.memory.setFailure(nil, for: .createItem)
            let report = try await controller.sync()
            #expect(report.uploaded == 61)
            for name in names { #expect(f.memory.contents(of: name) == Data(name.utf8)) }
            #expect(f.memory.callCount(.createItem) == calls.values.count)
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty)
            #expect(try await controller.sync().uploaded == 0)
        }
    }

    @Test func oneBadItemDoesNotStopTheRest() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try write(Data("1".utf8), f, controller, "first.txt")
            try write(Data("2".utf8), f, controller, "second.txt")
            f.memory.setFailure(FileProviderError(.cannotSynchronize, "refused by the store"), for: .createItem, times: 1)
            let report = try await controller.sync()
            #expect(report.uploaded == 1)
            #expect(report.notices.contains { $0.contains("refused by the store") })
            try await controller.sync()
            #expect(f.memory.contents(of: "first.txt") == Data("1".utf8))
            #expect(f.memory.contents(of: "second.txt") == Data("2".utf8))
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
