import Foundation
import ProviderCore
import ProviderService
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// `serve` compares only the folders inotify saw change (``ScanScope``), so a re-sync costs what
/// changed, not the domain; and nothing a full comparison would send is missed.
@Suite("Serve compares what changed")
struct ServeScopeTests {
    /// A served domain of 12 folders of 4 files, synced once; `body` gets the replica, the
    /// controller serve uses and the folders its scans read since the last `reset`.
    static func withServedTree(
        _ body: (Fixture, URL, DomainController, _ read: @escaping @Sendable () -> [String], _ reset: @escaping @Sendable () -> Void)
            async throws -> Void
    ) async throws {
        try await Fixture.with { f in
            for folder in 0..<12 {
                for file in 0..<4 { _ = try f.memory.write(path: "d\(folder)/f\(file).txt", data: Data("\(folder)-\(file)".utf8)) }
            }
            let controller = try await f.addDomain()
            let read = Mutex<[String]>([])
            controller.syncUp.folderScanned.withLock { $0 = { folder in read.withLock { $0.append(folder) } } }
            let server = quietServer(f.manager, "mem", ServeOptions(pollInterval: 3600, settleSeconds: 0, debounceSeconds: 0.05))
            let running = Task { try await server.run() }
            let replica = URL(fileURLWithPath: try f.manager.domain(named: "mem").replicaPath)
            #expect(await eventually { server.completedSyncs >= 1 })
            #expect(
                await eventually { FileManager.default.fileExists(atPath: replica.appendingPathComponent("d11/f3.txt.placeholder").path) })
            // The syncs of serve's start are done: the first compares everything, and the folders
            // it made are new to the watcher, so the second compares them.
            #expect(await eventually { server.completedSyncs >= 2 })
            do {
                try await body(f, replica, controller, { read.withLock { $0 } }, { read.withLock { $0 = [] } })
            } catch {
                server.stop()
                try? await running.value
                throw error
            }
            server.stop()
            try await running.value
        }
    }

    @Test func aNewFileIsSentAfterComparingOnlyItsFolder() async throws {
        try await Self.withServedTree { f, replica, _, read, reset in
            reset()
            try Data("new".utf8).write(to: replica.appendingPathComponent("d3/new.txt"))
            #expect(await eventually { f.memory.contents(of: "d3/new.txt") == Data("new".utf8) })
            #expect(Set(read()) == ["d3"], "read \(read())")
        }
    }

    /// A move between folders is in both: sent as a move (the store keeps the item), comparing
    /// only the two folders.
    @Test func aMoveBetweenFoldersComparesBothAndIsSentAsAMove() async throws {
        try await Self.withServedTree { f, replica, controller, read, reset in
            let materialized = await controller.materialize(paths: ["d1/f0.txt"], recursive: false)
            #expect(materialized.allSatisfy { $0.error == nil })
            let (deletes, creates) = (f.memory.callCount(.deleteItem), f.memory.callCount(.createItem))
            reset()
            try FileManager.default.moveItem(
                at: replica.appendingPathComponent("d1/f0.txt"), to: replica.appendingPathComponent("d7/moved.txt"))
            #expect(
                await eventually { f.memory.contents(of: "d7/moved.txt") == Data("1-0".utf8) && f.memory.contents(of: "d1/f0.txt") == nil })
            #expect(Set(read()).isSubset(of: ["d1", "d7"]), "read \(read())")
            #expect(f.memory.callCount(.deleteItem) == deletes && f.memory.callCount(.createItem) == creates, "a move, not a copy")
        }
    }

    /// A file moved and edited before serve saw either goes up as a move and then an edit:
    /// the folder it went to is compared again after the move is sent.
    @Test func aFileMovedAndEditedIsSentWhole() async throws {
        try await Self.withServedTree { f, replica, controller, _, _ in
            let materialized = await controller.materialize(paths: ["d4/f1.txt"], recursive: false)
            #expect(materialized.allSatisfy { $0.error == nil })
            let target = replica.appendingPathComponent("d9/edited.txt")
            // One step for serve: moved and appended to (the same inode) before it looks.
            let script = "mv \"$0/d4/f1.txt\" \"$1\" && printf ' and more' >> \"$1\""
            let moved = try await runProgram(["sh", "-c", script, replica.path, target.path])
            #expect(moved.succeeded, "\(moved)")
            #expect(
                await eventually { f.memory.contents(of: "d9/edited.txt") == Data("4-1 and more".utf8) },
                "store: \(String(decoding: f.memory.contents(of: "d9/edited.txt") ?? Data(), as: UTF8.self))")
            #expect(f.memory.contents(of: "d4/f1.txt") == nil)
        }
    }

    /// A folder made with things inside is compared with everything below it; a folder deleted
    /// is one deletion, found in its parent.
    @Test func aNewTreeIsComparedWholeAndADeletedFolderOnce() async throws {
        try await Self.withServedTree { f, replica, _, read, reset in
            reset()
            let deep = replica.appendingPathComponent("n/m")
            try FileManager.default.createDirectory(at: deep, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: deep.appendingPathComponent("x.txt"))
            #expect(await eventually { f.memory.contents(of: "n/m/x.txt") == Data("x".utf8) })
            #expect(Set(read()).isSubset(of: ["", "n", "n/m"]), "read \(read())")
            reset()
            try FileManager.default.removeItem(at: replica.appendingPathComponent("d2"))
            #expect(await eventually { f.memory.contents(of: "d2/f0.txt") == nil })
            // The folders of the last sync that sent something are compared once more.
            #expect(Set(read()).isSubset(of: ["", "d2", "n", "n/m"]), "read \(read())")
            #expect(f.memory.contents(of: "d3/f0.txt") == Data("3-0".utf8), "nothing else went")
        }
    }

    @Test func scopesMergeAndCoverWhatIsBelowATree() {
        var scope = ScanScope.none
        scope.formUnion(ScanScope(everything: false, folders: ["a", "a/b/c", "z"], trees: ["a/b", "a/b/d"]))
        #expect(scope.roots.trees == ["a/b"])
        #expect(scope.roots.folders == ["a", "z"])
        scope.formUnion(.all)
        #expect(scope == .all)
        var large = ScanScope.none
        large.formUnion(ScanScope(everything: false, folders: Set((0...ScanScope.maximumFolders).map { "f\($0)" }), trees: []))
        #expect(large == .all, "past the bound, a full comparison")
    }

    @Test func nothingWatchedMeansEverything() async {
        let changes = ChangedFolders()
        #expect(await changes.take() == .all)
        changes.folderChanged("a")
        #expect(await changes.take() == .all, "no watcher: every take compares everything")
    }
}
