import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderEngine
@testable import ProviderStore

/// Recursive work never holds a whole domain or a whole subtree (issue #18): partly present
/// files are asked for per item or per page, a folder deleted here is taken apart deepest first
/// a page at a time, and a folder the change feed names as deleted is settled a page at a time.
/// Pages are made 1 to 3 records here, and the results must be those of one big page.
@Suite("Recursive work in pages, never the whole domain")
struct SubtreeBoundsTests {
    /// Records a subtree `a` with partly downloaded files (4 KiB of each present) in a
    /// `dataless` domain, beside files outside it, and damages the ranges of `b/r.bin`: their
    /// sizes add up beyond 2^63, so a query summing every partly present file of the domain
    /// fails (SQLite's integer overflow). Work on `a` must not read them.
    private func partlyPresent(_ f: Fixture) async throws -> DomainController {
        for path in Self.partial + ["a/w.bin", "a-b/q.bin", "b/r.bin"] { try f.memory.write(path: path, data: bytes(10_000, seed: 1)) }
        let controller = try await f.addDomain(mode: .dataless)
        try await controller.sync()
        try present(Self.partial + ["a-b/q.bin"], controller, f)
        let broken = try controller.record(at: "b/r.bin")
        try f.manager.store.write { db in
            try db.execute(
                sql: """
                    INSERT INTO presentRange (domainID, identifier, contentVersion, start, "end")
                    VALUES (?, ?, ?, 0, 9223372036854775807), (?, ?, ?, 1, 9223372036854775807)
                    """,
                arguments: [
                    controller.domainID, broken.identifier.rawValue, broken.contentVersion, controller.domainID, broken.identifier.rawValue,
                    broken.contentVersion,
                ])
        }
        #expect(throws: FileProviderError.self) { try f.manager.store.partiallyPresent(domainID: controller.domainID) }
        return controller
    }

    static let partial = ["a/p0.bin", "a/x/p1.bin", "a/x/p2.bin", "a/y/p3.bin"]

    /// Records the first 4 KiB of each file as present.
    private func present(_ paths: [String], _ controller: DomainController, _ f: Fixture) throws {
        for path in paths {
            let record = try controller.record(at: path)
            try f.manager.store.addPresentRange(
                0..<4096, domainID: controller.domainID, identifier: record.identifier, contentVersion: record.contentVersion)
        }
    }

    private func presentBytes(_ path: String, _ controller: DomainController, _ f: Fixture) throws -> Int64? {
        try f.manager.store.presentBytes(domainID: controller.domainID, identifier: controller.record(at: path).identifier)
    }

    @Test(arguments: [1, 2, 3])
    func evictAndOnlineOnlyAskForThePartlyPresentFilesOfEachPage(page: Int) async throws {
        try await Fixture.with { f in
            let controller = try await partlyPresent(f)
            controller.subtreePage.withLock { $0 = page }
            let evicted = await controller.evict(paths: ["a"], recursive: true)
            #expect(evicted.allSatisfy { $0.error == nil }, "\(evicted.compactMap(\.message))")
            #expect(evicted.map(\.path).sorted() == Self.partial.map { "mem:/" + $0 })
            for path in Self.partial + ["a/w.bin"] { #expect(try presentBytes(path, controller, f) == nil, "\(path)") }
            #expect(try presentBytes("a-b/q.bin", controller, f) == 4096)

            try present(Self.partial, controller, f)
            let online = await controller.setPolicy(.onlineOnly, paths: ["a"])
            #expect(online.outcomes.allSatisfy { $0.error == nil }, "\(online.outcomes.compactMap(\.message))")
            #expect(online.outcomes.map(\.path).sorted() == Self.partial.map { "mem:/" + $0 })
            for path in Self.partial { #expect(try presentBytes(path, controller, f) == nil, "\(path)") }
            #expect(try presentBytes("a-b/q.bin", controller, f) == 4096)
        }
    }

    @Test func aSyncFindsStalePartlyPresentFilesWithoutSummingTheDomain() async throws {
        try await Fixture.with { f in
            let controller = try await partlyPresent(f)
            _ = await controller.setPolicy(.evictOnRemoteUpdate, paths: ["a-b"])
            try f.memory.write(path: "a-b/q.bin", data: bytes(12_000, seed: 2))
            let report = try await controller.sync()
            #expect(report.evictedOnUpdate == 1, "\(report.notices)")
            #expect(try presentBytes("a-b/q.bin", controller, f) == nil)
            #expect(try presentBytes("a/p0.bin", controller, f) == 4096, "not changed in the store: kept")
        }
    }

    /// Every item of `t` (paths are identifiers in the memory store).
    static let deletedTree = [
        "t", "t/a.txt", "t/x", "t/x/b.txt", "t/x/deep", "t/x/deep/c.txt", "t/x/deep/d.txt", "t/y", "t/y/e.txt", "t/y/empty", "t/z.txt",
    ]

    @Test(arguments: [1, 2, 3, 4096])
    func aFolderDeletedHereIsDeletedInTheStoreDeepestFirstInPages(page: Int) async throws {
        try await Fixture.with { f in
            for path in Self.deletedTree where path.hasSuffix(".txt") { try f.memory.write(path: path, data: Data(path.utf8)) }
            _ = try f.memory.mkdir(path: "t/y/empty")
            for path in ["t-b/keep.txt", "t.c/keep.txt", "u/keep.txt"] { try f.memory.write(path: path, data: Data(path.utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["t/x/deep/d.txt"], recursive: false)) == [nil])
            controller.subtreePage.withLock { $0 = page }
            // The store changed d.txt since it was downloaded: it stays, and so do its folders.
            try f.memory.write(path: "t/x/deep/d.txt", data: Data("changed in the store".utf8))
            let asked = Mutex<[String]>([])
            f.memory.setHook(for: .deleteItem) { identifier in asked.withLock { $0.append(identifier?.rawValue ?? "") } }
            try FileManager.default.removeItem(at: f.url(controller, "t"))
            let report = try await controller.sync()
            f.memory.setHook(for: .deleteItem, nil)
            let deleted = asked.withLock { $0 }
            #expect(deleted.sorted() == Self.deletedTree.sorted(), "each item once")
            for (index, path) in deleted.enumerated() {
                #expect(!deleted[(index + 1)...].contains { $0.hasPrefix(path + "/") }, "\(path) before what it holds: \(deleted)")
            }
            #expect(f.memory.contents(of: "t/x/deep/d.txt") == Data("changed in the store".utf8))
            for path in ["t/a.txt", "t/x/b.txt", "t/x/deep/c.txt", "t/y/e.txt", "t/z.txt"] {
                #expect(f.memory.contents(of: path) == nil, "\(path)")
            }
            for path in ["t-b/keep.txt", "t.c/keep.txt", "u/keep.txt"] { #expect(f.memory.contents(of: path) == Data(path.utf8)) }
            #expect(
                f.memory.allIdentifiers.map(\.rawValue).filter { $0.hasPrefix("t/") || $0 == "t" } == [
                    "t", "t/x", "t/x/deep", "t/x/deep/d.txt",
                ])
            #expect(try controller.record(at: "t/x/deep/d.txt").kind == .file, "back with the listing: \(report)")
        }
    }

    @Test(arguments: [1, 2, 3])
    func aFolderTheFeedNamesAsDeletedIsSettledInPages(page: Int) async throws {
        try await Fixture.with(memory: MemoryBackend(hasChangeFeed: true, pageSize: 7, changeBatchSize: 3)) { f in
            let inside = ["gone/a.txt", "gone/x/b.txt", "gone/x/deep/c.txt", "gone/x/deep/edited.txt", "gone/x/m.bin", "gone/y/d.txt"]
            for path in inside { try f.memory.write(path: path, data: Data(path.utf8)) }
            try f.memory.write(path: "gone/x/m.bin", data: bytes(5000, seed: 9))
            for path in ["gone-b/keep.txt", "gone.c/keep.txt", "keep/k.txt"] { try f.memory.write(path: path, data: Data(path.utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["gone/x/m.bin"], recursive: false)) == [nil])
            controller.subtreePage.withLock { $0 = page }
            let fetches = f.memory.callCount(.fetchContents)
            _ = try f.memory.rename(from: "gone/x/m.bin", to: "keep/m.bin")
            try f.memory.remove(path: "gone")
            let report = try await controller.sync()
            #expect(report.moved == 1 && report.deleted == 9, "\(report)")
            #expect(f.memory.callCount(.fetchContents) == fetches, "the moved download went along")
            #expect(try controller.record(at: "keep/m.bin").state == .materialized)
            #expect(try Data(contentsOf: f.url(controller, "keep/m.bin")) == bytes(5000, seed: 9))
            #expect(try controller.list(at: "", recursive: true).map(\.path).filter { $0.hasPrefix("gone/") || $0 == "gone" } == [])
            #expect(tree(at: controller.replica.root).filter { $0.hasPrefix("gone/") } == [])
            for path in ["gone-b/keep.txt", "gone.c/keep.txt", "keep/k.txt"] { #expect(try controller.record(at: path).kind == .file) }
        }
    }
    @Test(arguments: [1, 2, 3])
    func aMovedFolderIsReKeyedAFolderListingAtATime(page: Int) async throws {
        try await Fixture.with { f in
            let files = ["m/a.txt", "m/b.bin", "m/x/c.txt", "m/x/deep/d.txt", "m/x/deep/e.txt", "m/y/f.txt", "m/y/g.txt", "m-b/keep.txt"]
            for path in files { try f.memory.write(path: path, data: Data(path.utf8)) }
            _ = try f.memory.mkdir(path: "m/empty")
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["m/b.bin"], recursive: false)) == [nil])
            controller.subtreePage.withLock { $0 = page }
            // The store deletes g.txt meanwhile; here the folder moves, and a placeholder that
            // still names its old identifier moves out of it before the folder move is sent.
            try f.memory.remove(path: "m/y/g.txt")
            try FileManager.default.moveItem(at: f.url(controller, "m"), to: f.url(controller, "n"))
            try FileManager.default.moveItem(
                at: f.placeholderURL(controller, "n/x/c.txt"), to: f.placeholderURL(controller, "c moved.txt"))
            let report = try await controller.sync()
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(f.memory.callCount(.createItem) == 0, "nothing uploaded again")
            #expect(f.memory.contents(of: "c moved.txt") == Data("m/x/c.txt".utf8), "moving a placeholder never deletes its item")
            for path in ["a.txt", "b.bin", "x/deep/d.txt", "x/deep/e.txt", "y/f.txt"] {
                #expect(f.memory.contents(of: "n/" + path) == Data(("m/" + path).utf8), "\(path)")
                #expect(try controller.record(at: "n/" + path).identifier.rawValue == "n/" + path)
            }
            #expect(try controller.record(at: "n/b.bin").state == .materialized)
            #expect(try placeholder(at: f.placeholderURL(controller, "n/x/deep/d.txt")).identifier == "n/x/deep/d.txt")
            #expect(try controller.list(at: "", recursive: true).map(\.path).filter { $0 == "m" || $0.hasPrefix("m/") } == [])
            #expect(
                tree(at: controller.replica.root) == [
                    "c moved.txt.placeholder", "m-b/", "m-b/keep.txt.placeholder", "n/", "n/a.txt.placeholder", "n/b.bin", "n/empty/",
                    "n/x/",
                    "n/x/deep/", "n/x/deep/d.txt.placeholder", "n/x/deep/e.txt.placeholder", "n/y/", "n/y/f.txt.placeholder",
                ])
            let again = try await controller.sync()
            #expect(again.uploaded == 0 && again.deleted == 0 && again.added == 0, "\(again)")
        }
    }
    @Test func materializeAndEvictGiveTheirOutcomesAPageAtATime() async throws {
        try await Fixture.with { f in
            let files = ["a/f0", "a/f1", "a/x/g0", "a/x/g1", "a/x/deep/h0", "a/x/deep/h1", "a/y/i0", "a/z", "b/j"]
            for path in files { try f.memory.write(path: path, data: Data(path.utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            controller.subtreePage.withLock { $0 = 3 }
            let downloaded = OutcomeCollector()
            let batches = Mutex<[Int]>([])
            await controller.materialize(
                paths: ["a"], recursive: true,
                outcomes: { batch in
                    downloaded.handler(batch)
                    batches.withLock { $0.append(batch.count) }
                })
            #expect(downloaded.outcomes.map(\.path).sorted() == files.dropLast().map { "mem:/" + $0 }.sorted())
            #expect(downloaded.outcomes.allSatisfy { $0.error == nil })
            #expect(batches.withLock { $0 }.allSatisfy { $0 <= 3 }, "no more than a page held: \(batches.withLock { $0 })")
            batches.withLock { $0.removeAll() }
            let evicted = OutcomeCollector()
            await controller.evict(
                paths: ["a"], recursive: true,
                outcomes: { batch in
                    evicted.handler(batch)
                    batches.withLock { $0.append(batch.count) }
                })
            #expect(evicted.outcomes.map(\.path).sorted() == files.dropLast().map { "mem:/" + $0 }.sorted())
            #expect(batches.withLock { $0 }.allSatisfy { $0 <= 3 }, "\(batches.withLock { $0 })")
            // The arrays of the same operations: the same outcomes.
            #expect(
                await controller.materialize(paths: ["a"], recursive: true).map(\.path).sorted()
                    == files.dropLast().map { "mem:/" + $0 }.sorted())
        }
    }
}
