import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// Blocking work never runs on Swift's cooperative pool (two threads here): a whole sync (its
/// checks, sync up, sync down, settling, due downloads, the recorded outcome) reads and writes
/// the database and the replica on the engine's threads only.
/// What the pool-use tests share.
enum PoolUses {
    /// A domain over a store of `count` files in each of the folders a, b and c, synced once.
    static func syncedStore(_ f: Fixture, files count: Int) async throws -> DomainController {
        for index in 0..<count {
            _ = try f.memory.write(path: "a/f\(index).txt", data: Data("a \(index)\n".utf8))
            _ = try f.memory.write(path: "b/g\(index).txt", data: Data("b \(index)\n".utf8))
            _ = try f.memory.write(path: "c/h\(index).txt", data: Data("c \(index)\n".utf8))
        }
        let controller = try await f.addDomain()
        try await controller.sync()
        return controller
    }

    /// Syncs and returns how many blocking calls the sync made on the pool, with its report.
    static func sync(_ controller: DomainController) async throws -> (uses: Int, report: SyncReport) {
        let report = Mutex<SyncReport?>(nil)
        let uses = try await PoolCheck.counting {
            let done = try await controller.sync()
            report.withLock { $0 = done }
        }
        return (uses, try #require(report.withLock { $0 }))
    }
}

@Suite("Database work off the cooperative pool")
struct PoolUseTests {
    /// Syncs a store of `count` files in two folders, then changes it behind the engine (new
    /// files, files moved between folders, files deleted, a folder gone) and returns how many
    /// database calls the second sync made on the pool. With `feed`, the store has a change
    /// feed and the second sync reads the changes from it.
    static func poolUses(files count: Int, feed: Bool = false) async throws -> Int {
        try await Fixture.with(memory: MemoryBackend(hasChangeFeed: feed, pageSize: 7)) { f in
            let controller = try await PoolUses.syncedStore(f, files: count)
            for index in 0..<count {
                _ = try f.memory.write(path: "a/new\(index).txt", data: Data("new \(index)\n".utf8))
                try f.memory.remove(path: "b/g\(index).txt")
                _ = try f.memory.write(path: "a/g\(index).txt", data: Data("b \(index)\n".utf8))
            }
            try f.memory.remove(path: "c")
            let (uses, done) = try await PoolUses.sync(controller)
            #expect(done.added >= count && done.deleted >= count, "\(done)")
            return uses
        }
    }

    /// The replica's blocking calls are counted as the database's are: on the pool, not on
    /// the engine's executor.
    @Test func replicaCallsOnThePoolAreCounted() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            let (replica, executor) = (controller.replica, controller.context.executor)
            let onPool = await PoolCheck.counting { _ = replica.fingerprint(atPath: replica.path("")) }
            let offPool = try await PoolCheck.counting {
                _ = try await executor.run { replica.fingerprint(atPath: replica.path("")) }
            }
            #expect(onPool == 1)
            #expect(offPool == 0)
        }
    }

    /// Strict mode (on for these tests): a blocking call on the pool inside an engine
    /// operation records an issue; outside one, or exempt, it does not.
    @Test func strictModeFailsABlockingCallOnThePoolInsideAnOperation() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            let replica = controller.replica
            await withKnownIssue {
                await PoolCheck.during("a test's operation") { _ = replica.fingerprint(atPath: replica.path("")) }
            }
            _ = replica.fingerprint(atPath: replica.path(""))
            await PoolCheck.during("a test's operation") {
                PoolCheck.exempt { _ = replica.fingerprint(atPath: replica.path("")) }
            }
        }
    }

    @Test func syncDownMakesNoBlockingCallOnThePool() async throws {
        let uses = try await Self.poolUses(files: 12)
        #expect(uses == 0, "\(uses) blocking calls on the pool")
    }

    @Test func syncDownFromAChangeFeedMakesNoBlockingCallOnThePool() async throws {
        let uses = try await Self.poolUses(files: 12, feed: true)
        #expect(uses == 0, "\(uses) blocking calls on the pool")
    }
}

/// Sync up: the database work of each local change (journal entries, the records of what was
/// sent, the lookups of folders and descendants) runs on the engine's threads, and so does the
/// rest of the sync that sends them.
@Suite("Sync up's database work off the cooperative pool")
struct SyncUpPoolUseTests {
    /// Syncs a store of `count` files in each of three folders, downloads them, then changes
    /// the replica (new files, edits, files moved between folders, files deleted) and returns
    /// how many database calls the sync that sends those changes made on the pool.
    static func poolUses(files count: Int) async throws -> Int {
        try await Fixture.with { f in
            let controller = try await PoolUses.syncedStore(f, files: count)
            for folder in ["a", "b", "c"] {
                #expect(await controller.materialize(paths: [folder], recursive: true).allSatisfy { $0.error == nil })
            }
            let replica = controller.replica
            for index in 0..<count {
                try Data("new \(index)\n".utf8).write(to: replica.url("a/new\(index).txt"))
                try Data("edited \(index)\n".utf8).write(to: replica.url("a/f\(index).txt"))
                try FileManager.default.moveItem(at: replica.url("b/g\(index).txt"), to: replica.url("a/g\(index).txt"))
                try FileManager.default.removeItem(at: replica.url("c/h\(index).txt"))
            }
            let (uses, done) = try await PoolUses.sync(controller)
            #expect(done.uploaded >= 4 * count && done.notices.isEmpty, "\(done)")
            #expect(f.memory.contents(of: "a/g0.txt") == Data("b 0\n".utf8))
            #expect(f.memory.contents(of: "a/f0.txt") == Data("edited 0\n".utf8))
            #expect(f.memory.contents(of: "c/h0.txt") == nil)
            return uses
        }
    }

    @Test func syncUpMakesNoBlockingCallOnThePool() async throws {
        let uses = try await Self.poolUses(files: 12)
        #expect(uses == 0, "\(uses) blocking calls on the pool")
    }
}
