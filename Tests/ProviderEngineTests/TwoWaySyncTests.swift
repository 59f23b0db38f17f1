import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Local changes go up, conflicts keep both, errors back off: one scenario per row of the
/// two-way sync table, over MemoryBackend. Conflicts: ``TwoWayConflictTests``; replays of
/// interrupted operations and outages: ``InterruptedReplayTests``.
@Suite struct TwoWaySyncTests: ReplicaEditing {
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

    /// git's lock files, vim's further swap files and other editors' lock files are never
    /// uploaded by default (in a folder named `.git` as anywhere); a domain's `!PATTERN` takes a
    /// default off (here `*.tmp`), and never our own staging names.
    @Test func lockAndSwapFilesStayLocalByDefaultAndADomainCanTakeADefaultOff() async throws {
        try await Fixture.with { f in
            try await f.manager.addDomain(
                name: "ig", kind: "memory", options: ["store": f.remoteName], ignorePatterns: ["!*.tmp", "!.fp-tmp-*"])
            let controller = try await f.manager.controller(for: "ig")
            try await controller.sync()
            let local = [
                "repo/.git/index.lock", "repo/.git/HEAD.lock", "repo/.git/config.lock", "repo/.git/packed-refs.lock",
                "repo/.git/refs/heads/main.lock",
                ".notes.txt.swo", ".notes.txt.swn", "notes.txt.kate-swp", ".~lock.report.odt#",
            ]
            for name in local { try write(Data("x".utf8), f, controller, name) }
            try write(Data("real".utf8), f, controller, "repo/.git/index")
            try write(Data("kept".utf8), f, controller, "scratch.tmp")
            try write(Data("lock".utf8), f, controller, "Cargo.lock")
            try await controller.sync()
            let stored = Set(f.memory.allIdentifiers.map(\.rawValue))
            for name in local { #expect(!stored.contains(name), "\(name) was uploaded") }
            for name in ["repo/.git/index", "scratch.tmp", "Cargo.lock"] { #expect(stored.contains(name), "\(name) was not uploaded") }
        }
        #expect(IgnoreRules(extra: ["!.fp-tmp-*"]).ignores(".fp-tmp-x"))
        #expect(IgnoreRules().ignores(".a.swp") && !IgnoreRules(extra: ["!*.tmp"]).ignores("a.tmp") && IgnoreRules().ignores("a.tmp"))
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

/// What the two-way sync suites share: writing into and looking at a domain's replica.
protocol ReplicaEditing {}

extension ReplicaEditing {
    func write(_ data: Data, _ f: Fixture, _ controller: DomainController, _ path: String) throws {
        let url = f.url(controller, path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url, options: .atomic)
    }

    func exists(_ f: Fixture, _ controller: DomainController, _ path: String) -> Bool {
        FileManager.default.fileExists(atPath: f.url(controller, path).path)
    }
}
