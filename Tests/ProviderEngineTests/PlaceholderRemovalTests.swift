import Foundation
import LocalAdapter
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine
@testable import ProviderSystem

/// A materialized file never keeps a `.placeholder` file beside it. `materialize` reads each
/// folder of its files once, holding the domain's sync lock, and skips removing the placeholders
/// that are not there; these tests check that the ones that are there still go.
@Suite("Placeholders beside downloads")
struct PlaceholderRemovalTests {
    /// The files below `root` that end in `.placeholder`.
    private func placeholders(_ controller: DomainController) -> [String] {
        tree(at: controller.replica.root).filter { $0.hasSuffix(".placeholder") }
    }

    @Test(arguments: [false, true])
    func placeholdersThatStandBesideTheFilesGoWhenTheFilesAreDownloaded(recursive: Bool) async throws {
        try await Fixture.with { f in
            let files = ["p/a.txt", "p/b.txt", "q/c.txt", "q/d.txt", "top.txt"]
            for path in files { try f.memory.write(path: path, data: Data("\(path)\n".utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 0)
            // "p" populated: its placeholders stand beside the names. "q" dataless, with one
            // placeholder of a population cut short before the database learned of it.
            #expect(await controller.populate(paths: ["p"], recursive: false).allSatisfy { $0.error == nil })
            try controller.replica.writePlaceholder(
                "q/c.txt", PlaceholderMetadata(domain: "mem", record: try controller.record(at: "q/c.txt")))
            #expect(
                placeholders(controller) == ["p/a.txt.placeholder", "p/b.txt.placeholder", "q/c.txt.placeholder", "top.txt.placeholder"])

            let outcomes =
                recursive
                ? await controller.materialize(paths: [""], recursive: true)
                : await controller.materialize(paths: files, recursive: false)
            #expect(outcomes.count == files.count && outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.message))")
            for path in files {
                #expect(try controller.record(at: path).state == .materialized, "\(path)")
                #expect(FileManager.default.contents(atPath: controller.replica.url(path).path) == Data("\(path)\n".utf8))
            }
            #expect(placeholders(controller) == [])
            #expect(try !controller.record(at: "q").isDataless)
            // The lock is let go: a sync runs.
            let report = try await controller.sync()
            #expect(report.uploaded == 0 && report.conflicts == 0, "\(report)")
            #expect(placeholders(controller) == [])
        }
    }

    @Test func withTheSyncLockHeldElsewhereEveryDownloadStillRemovesItsPlaceholder() async throws {
        try await Fixture.with { f in
            let files = ["p/a.txt", "p/b.txt"]
            for path in files { try f.memory.write(path: path, data: Data(path.utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(await controller.populate(paths: ["p"], recursive: false).allSatisfy { $0.error == nil })
            #expect(placeholders(controller) == ["p/a.txt.placeholder", "p/b.txt.placeholder"])
            // Another process's sync holds the lock: materialize cannot know that no
            // placeholder appears meanwhile, so it removes each one (the folder needs no
            // population, so nothing waits for the lock).
            let held = try #require(try DomainLock.attempt(controller.locks.syncLockPath))
            let outcomes = await controller.materialize(paths: ["p"], recursive: true)
            #expect(outcomes.count == files.count && outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.message))")
            #expect(placeholders(controller) == [])
            withExtendedLifetime(held) {}
        }
    }

    /// The local store creates its fetch destinations: the engine makes only the staging
    /// folders (each batch makes its own, so one removed behind its back comes back), and a
    /// materialize of many small files leaves no placeholder and no staging file behind.
    @Test func aStoreThatCreatesItsDestinationsGetsOnlyTheStagingFolders() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-created-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storeRoot = folder.appendingPathComponent("store")
        var files: [String] = []
        for sub in ["d0", "d1"] {
            try FileManager.default.createDirectory(at: storeRoot.appendingPathComponent(sub), withIntermediateDirectories: true)
            for index in 0..<150 {
                let path = "\(sub)/file\(index).bin"
                try Data("\(path)\n".utf8).write(to: storeRoot.appendingPathComponent(path))
                files.append(path)
            }
        }
        let manager = try ProviderManager(home: folder.appendingPathComponent("home"), registry: BackendRegistry([LocalBackend.descriptor]))
        try await manager.addDomain(name: "local", kind: "local", options: ["root": storeRoot.path])
        let controller = try await manager.controller(for: "local")
        try await controller.sync()
        #expect(controller.downloader.backend.capabilities.createsFetchDestinations)
        let first = await controller.materialize(paths: ["d0"], recursive: true)
        #expect(first.count == 150 && first.allSatisfy { $0.error == nil }, "\(first.compactMap(\.message))")
        // The staging folders removed behind the engine's back.
        let staging = controller.replica.staging
        for name in try FileManager.default.contentsOfDirectory(atPath: staging.path) {
            try FileManager.default.removeItem(at: staging.appendingPathComponent(name))
        }
        let second = await controller.materialize(paths: ["d1"], recursive: true)
        #expect(second.count == 150 && second.allSatisfy { $0.error == nil }, "\(second.compactMap(\.message))")
        for path in files {
            #expect(try controller.record(at: path).state == .materialized, "\(path)")
            #expect(FileManager.default.contents(atPath: controller.replica.url(path).path) == Data("\(path)\n".utf8))
        }
        #expect(tree(at: controller.replica.root).filter { $0.hasSuffix(".placeholder") } == [])
        #expect(controller.replica.stagedFiles().isEmpty)
        await manager.close()
    }

    /// Only a page of small files holds the domain's sync lock while it downloads: a sync in
    /// another process is never kept waiting for large transfers.
    @Test func onlyASmallPageHoldsTheSyncLockWhileItDownloads() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "q/small.txt", data: Data("small\n".utf8))
            try f.memory.write(path: "r/big.bin", data: Data(count: Int(Materializer.placeholderFreeBytes) + 1))
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 0)
            let path = controller.locks.syncLockPath
            let heldDuringFetch = Mutex<[Bool]>([])
            f.memory.setHook(for: .fetchContents) { _ in
                // A lock this process holds is refused at once; a free one is taken and let go.
                let free = (try? DomainLock.attempt(path)) ?? nil
                heldDuringFetch.withLock { $0.append(free == nil) }
            }
            #expect(await controller.materialize(paths: ["q/small.txt"], recursive: false).allSatisfy { $0.error == nil })
            #expect(await controller.materialize(paths: ["r/big.bin"], recursive: false).allSatisfy { $0.error == nil })
            f.memory.setHook(for: .fetchContents, nil)
            #expect(heldDuringFetch.withLock { $0 } == [true, false])
            #expect(tree(at: controller.replica.root).filter { $0.hasSuffix(".placeholder") } == [])
        }
    }
}
