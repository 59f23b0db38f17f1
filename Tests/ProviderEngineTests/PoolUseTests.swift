import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

/// Blocking work never runs on Swift's cooperative pool (two threads here): sync down reads
/// and writes the database on the engine's threads. A sync of a store with more changes makes
/// no more database calls on the pool than one with few: what remains there is per sync, not
/// per item.
@Suite("Database work off the cooperative pool")
struct PoolUseTests {
    /// Syncs a store of `count` files in two folders, then changes it behind the engine (new
    /// files, files moved between folders, files deleted, a folder gone) and returns how many
    /// database calls the second sync made on the pool.
    static func poolUses(files count: Int) async throws -> Int {
        try await Fixture.with { f in
            for index in 0..<count {
                _ = try f.memory.write(path: "a/f\(index).txt", data: Data("a \(index)\n".utf8))
                _ = try f.memory.write(path: "b/g\(index).txt", data: Data("b \(index)\n".utf8))
                _ = try f.memory.write(path: "c/h\(index).txt", data: Data("c \(index)\n".utf8))
            }
            let controller = try await f.addDomain()
            try await controller.sync()
            for index in 0..<count {
                _ = try f.memory.write(path: "a/new\(index).txt", data: Data("new \(index)\n".utf8))
                try f.memory.remove(path: "b/g\(index).txt")
                _ = try f.memory.write(path: "a/g\(index).txt", data: Data("b \(index)\n".utf8))
            }
            try f.memory.remove(path: "c")
            let report = Mutex<SyncReport?>(nil)
            let uses = try await PoolCheck.counting {
                let done = try await controller.sync()
                report.withLock { $0 = done }
            }
            let done = try #require(report.withLock { $0 })
            #expect(done.added >= count && done.deleted >= count, "\(done)")
            return uses
        }
    }

    @Test func syncDownsDatabaseCallsOnThePoolDoNotGrowWithTheChanges() async throws {
        let few = try await Self.poolUses(files: 3)
        let many = try await Self.poolUses(files: 40)
        #expect(many == few, "\(few) calls on the pool for 3 changed files of each kind, \(many) for 40")
    }
}
