import Foundation
import ProviderCore
import ProviderService
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// Domain management, the population of dataless folders, the unsent changes and `serve`'s
/// loop make no blocking call on the cooperative pool: their database and folder work runs on
/// the engine's threads.
@Suite("Domains, populations and serve off the cooperative pool")
struct ManagerPoolUseTests {
    @Test func addingOpeningChangingAndRemovingADomainMakeNoBlockingCallOnThePool() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a/f.txt", data: Data("a\n".utf8))
            var steps: [String: Int] = [:]
            steps["add"] = try await PoolCheck.counting { _ = try await f.addDomain("one") }
            steps["add adopting"] = try await PoolCheck.counting {
                _ = try await f.manager.addDomainAdoptingReplica(
                    name: "two", kind: "memory", options: ["store": f.remoteName],
                    replicaPath: f.folder.appendingPathComponent("two").path)
            }
            steps["unsent changes"] = try await PoolCheck.counting { _ = try await f.manager.unsentChanges(inDomain: "one") }
            steps["set options"] = try await PoolCheck.counting {
                _ = try await f.manager.setBackendOptions(ofDomain: "two", ["store": f.remoteName])
            }
            steps["controller"] = try await PoolCheck.counting { _ = try await f.manager.controller(for: "two") }
            steps["remove"] = try await PoolCheck.counting { try await f.manager.removeDomain(named: "one", keepReplica: false) }
            #expect(steps.values.allSatisfy { $0 == 0 }, "blocking calls on the pool in each step: \(steps)")
            #expect(try f.manager.domains().map(\.name) == ["two"])
        }
    }

    /// Folders left dataless by a sync with no population budget, populated by `populate`
    /// (one by one and recursively) and by materializing a file inside one.
    @Test func populatingDatalessFoldersMakesNoBlockingCallOnThePool() async throws {
        try await Fixture.with { f in
            for index in 0..<6 {
                for folder in ["a", "b/c", "d/e"] {
                    _ = try f.memory.write(path: "\(folder)/f\(index).txt", data: Data("\(folder) \(index)\n".utf8))
                }
            }
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 0)
            #expect(try controller.record(at: "a").isDataless)
            var steps: [String: Int] = [:]
            steps["populate"] = await PoolCheck.counting {
                #expect(await controller.populate(paths: ["a"], recursive: false).allSatisfy { $0.error == nil })
            }
            steps["populate recursive"] = await PoolCheck.counting {
                #expect(await controller.populate(paths: ["b"], recursive: true).allSatisfy { $0.error == nil })
            }
            steps["materialize inside"] = await PoolCheck.counting {
                #expect(await controller.materialize(paths: ["d/e/f0.txt", "d/e"], recursive: false).allSatisfy { $0.error == nil })
            }
            #expect(steps.values.allSatisfy { $0 == 0 }, "blocking calls on the pool in each step: \(steps)")
            #expect(FileManager.default.fileExists(atPath: f.url(controller, "b/c/f5.txt").path + Replica.placeholderSuffix))
            #expect(try controller.record(at: "d/e/f0.txt").state == .materialized)
        }
    }

    /// `serve`'s start and its passes (the domain's state, backoff, syncs, the counters it
    /// compares) run off the pool: a served domain takes a local file and a remote one.
    @Test func servingMakesNoBlockingCallOnThePool() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a/f.txt", data: Data("a\n".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let server = quietServer(f.manager, "mem", ServeOptions(pollInterval: 0.1, settleSeconds: 0, debounceSeconds: 0.05))
            let uses = try await PoolCheck.counting {
                let running = Task { try await server.run() }
                #expect(await eventually { server.completedSyncs >= 1 })
                try Data("local\n".utf8).write(to: f.url(controller, "a/local.txt"))
                _ = try f.memory.write(path: "a/remote.txt", data: Data("remote\n".utf8))
                #expect(await eventually { f.memory.contents(of: "a/local.txt") == Data("local\n".utf8) })
                #expect(
                    await eventually {
                        FileManager.default.fileExists(atPath: f.url(controller, "a/remote.txt").path + Replica.placeholderSuffix)
                    })
                server.stop()
                try await running.value
            }
            #expect(uses == 0, "\(uses) blocking calls on the pool")
        }
    }
}
