import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// The store goes away in the middle of a sync (MemoryBackend starts failing every operation
/// with `serverUnreachable` from inside an upload); edits made during the outage are kept and
/// queued; once the store is back, the next sync uploads everything with no manual step.
@Suite struct OutageTests {
    static let operations: [MemoryBackend.Operation] = [.item, .enumerateItems, .fetchContents, .createItem, .modifyItem, .deleteItem]

    func write(_ data: Data, _ controller: DomainController, _ path: String) throws {
        let url = controller.replica.url(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url, options: .atomic)
    }

    @Test(arguments: chaosSeeds(default: [7, 8, 9]))
    func theStoreGoesAwayMidSyncAndEverythingGoesUpAfterwards(seed: UInt64) async throws {
        var rng = SeededGenerator(seed: seed)
        try await Fixture.with { f in
            for index in 0..<10 { _ = try f.memory.write(path: "existing/e\(index).txt", data: Data("base \(index)".utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["existing"], recursive: true)

            var expected: [String: Data] = [:]
            for index in 0..<10 { expected["existing/e\(index).txt"] = Data("base \(index)".utf8) }
            for index in 0..<30 {
                let path = "new/n\(index).bin"
                expected[path] = Data("new \(index)\n".utf8) + randomBytes(Int.random(in: 0...5000, using: &rng), using: &rng)
                try write(expected[path]!, controller, path)
            }
            for index in 0..<5 {
                let path = "existing/e\(index).txt"
                expected[path] = Data("edited before the outage \(index)".utf8)
                try write(expected[path]!, controller, path)
            }

            // The store goes down after a seeded number of uploads, from inside an upload call.
            let cut = Int.random(in: 1...25, using: &rng)
            let memory = f.memory
            let calls = CallCounter()
            memory.setHook(for: .createItem) { _ in
                if calls.increment() == cut {
                    for operation in Self.operations {
                        memory.setFailure(FileProviderError(.serverUnreachable, "connection refused (seed \(seed))"), for: operation)
                    }
                }
            }
            await expectCode(.serverUnreachable) { try await controller.sync() }
            let domain = try f.manager.domain(named: "mem")
            #expect(domain.lastError?.contains("connection refused") == true, "seed \(seed): \(domain.lastError ?? "nil")")
            let interrupted = try f.manager.store.unfinishedOperations(domainID: controller.domainID)
            // The uploads running when the store went down (several go at once) stay queued.
            #expect(
                (1...DomainController.uploadDepth).contains(interrupted.count) && interrupted.allSatisfy { $0.state == .pending },
                "seed \(seed): \(interrupted.map(\.templateIdentifier))")

            // Edits while the store is down: new files, an edit, a rename, a deletion.
            for index in 0..<5 {
                let path = "during/d\(index).txt"
                expected[path] = Data("written during the outage \(index) ".utf8) + randomBytes(100, using: &rng)
                try write(expected[path]!, controller, path)
            }
            expected["existing/e5.txt"] = Data("edited during the outage".utf8)
            try write(expected["existing/e5.txt"]!, controller, "existing/e5.txt")
            try FileManager.default.moveItem(at: controller.replica.url("existing/e6.txt"), to: controller.replica.url("existing/renamed.txt"))
            expected["existing/renamed.txt"] = expected.removeValue(forKey: "existing/e6.txt")
            try FileManager.default.removeItem(at: controller.replica.url("existing/e7.txt"))
            expected["existing/e7.txt"] = nil

            // Syncing during the outage fails fast, changes nothing and loses nothing.
            for _ in 0..<2 {
                await expectCode(.serverUnreachable) { try await controller.sync() }
            }
            #expect(try f.manager.domain(named: "mem").lastError != nil)
            let queued = try f.manager.store.unfinishedOperations(domainID: controller.domainID)
            #expect(!queued.isEmpty && queued.allSatisfy { $0.state == .pending }, "seed \(seed): \(queued.map(\.templateIdentifier))")
            for (path, data) in expected {
                #expect(try Data(contentsOf: controller.replica.url(path)) == data, "seed \(seed): \(path) changed during the outage")
            }

            // Back on the same "address": the next sync needs no manual step.
            for operation in Self.operations { memory.setFailure(nil, for: operation) }
            memory.setHook(for: .createItem, nil)
            let report = try await controller.sync()
            #expect(report.conflicts == 0, "seed \(seed): \(report.notices)")
            for (path, data) in expected {
                #expect(memory.contents(of: path) == data, "seed \(seed): \(path) did not reach the store")
            }
            #expect(memory.contents(of: "existing/e6.txt") == nil && memory.contents(of: "existing/e7.txt") == nil, "seed \(seed)")
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty, "seed \(seed)")
            #expect(try f.manager.domain(named: "mem").lastError == nil, "seed \(seed)")
            let createdOnce = memory.callCount(.createItem)
            #expect(try await controller.sync().uploaded == 0, "seed \(seed)")
            #expect(memory.callCount(.createItem) == createdOnce, "seed \(seed): nothing is uploaded twice")
            let names = Set(tree(at: controller.replica.root))
            #expect(!names.contains { $0.contains(" 2.") || $0.contains("conflicted copy") }, "seed \(seed): \(names.sorted())")
        }
    }
}

/// Counts calls from any thread.
final class CallCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    var value: Int { lock.withLock { count } }

    func increment() -> Int {
        lock.withLock {
            count += 1
            return count
        }
    }
}
