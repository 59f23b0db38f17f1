import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

/// Downloads, evictions and pins: their database work (and the replica's file work) runs on
/// the engine's threads, none on the cooperative pool.
@Suite("Transfers' blocking work off the cooperative pool")
struct TransferPoolUseTests {
    /// Blocking calls on the pool of each step of a flow over `count` files in each of four
    /// folders: materialize a folder, files named one by one, evict them, pin a folder, unpin it.
    static func poolUses(files count: Int) async throws -> [String: Int] {
        try await Fixture.with { f in
            for index in 0..<count {
                for folder in ["a", "b", "c", "d"] {
                    _ = try f.memory.write(path: "\(folder)/f\(index).txt", data: Data("\(folder) \(index)\n".utf8))
                }
            }
            let controller = try await f.addDomain()
            try await controller.sync()
            var uses: [String: Int] = [:]
            func step(_ name: String, _ body: @escaping @Sendable () async -> [ItemOutcome]) async {
                let failed = Mutex(0)
                uses[name] = await PoolCheck.counting {
                    let outcomes = await body()
                    failed.withLock { $0 = outcomes.filter { $0.error != nil }.count }
                }
                #expect(failed.withLock { $0 } == 0, "\(name)")
            }
            await step("materialize folder") { await controller.materialize(paths: ["a"], recursive: true) }
            let named = (0..<count).map { "c/f\($0).txt" }
            await step("materialize files") { await controller.materialize(paths: named, recursive: false) }
            await step("evict folder") { await controller.evict(paths: ["a"], recursive: true) }
            await step("evict files") { await controller.evict(paths: named, recursive: false) }
            await step("pin") { await controller.pin(paths: ["b"]) }
            await step("unpin") { await controller.unpin(paths: ["b"]).outcomes }
            let pinned = (0..<count).map { "d/f\($0).txt" }
            await step("pin files") { await controller.pin(paths: pinned) }
            await step("unpin files") { await controller.unpin(paths: pinned).outcomes }
            await step("pin files again") { await controller.pin(paths: pinned) }
            #expect(try controller.record(at: "b/f0.txt").state == .placeholder)
            #expect(try controller.record(at: "d/f0.txt").state == .materialized)
            return uses
        }
    }

    @Test func noBlockingCallOnThePool() async throws {
        let uses = try await Self.poolUses(files: 12)
        #expect(uses.values.allSatisfy { $0 == 0 }, "blocking calls on the pool in each step: \(uses)")
    }
}
