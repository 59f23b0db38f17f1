import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Outages and interrupted operations: what was queued goes up afterwards, and an operation the
/// store had already done when it was cut short is adopted, never done twice.
@Suite struct InterruptedReplayTests: ReplicaEditing {
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
}
