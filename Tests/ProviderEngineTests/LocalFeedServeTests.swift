import Foundation
import LocalAdapter
import Logging
import ProviderCore
import ProviderService
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// A local backend whose listings through the engine's walk are counted (the change feed lists
/// changed folders inside the backend, not through these calls).
private final class CountedLocal: ForwardingBackend, @unchecked Sendable {
    static let listings = Mutex<[String: Int]>([:])
    static let feedCalls = Mutex<[String: Int]>([:])
    let forwardee: any Backend
    let root: String

    init(root: String) throws(FileProviderError) {
        self.root = root
        forwardee = try LocalBackend(rootPath: root)
    }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        Self.listings.withLock { $0[root, default: 0] += 1 }
        return try await forwardee.enumerateItems(in: container, startingAt: page)
    }

    func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor) async throws(FileProviderError) -> ChangeSet {
        Self.feedCalls.withLock { $0[root, default: 0] += 1 }
        return try await forwardee.enumerateChanges(in: container, from: anchor)
    }

    func close() async { await forwardee.close() }

    static let descriptor = BackendDescriptor(
        kind: "counted-local", summary: "a local folder, listings counted",
        options: [BackendOption(name: "root", help: "the folder", type: .path, isRequired: true)],
        factory: { configuration in try CountedLocal(root: try configuration.string("root")) })
}

@Suite("Serve with the local change feed")
struct LocalFeedServeTests {
    /// A change made in the store by another program reaches the replica of a served domain
    /// through the feed: no folder is listed again.
    @Test func aStoreChangeComesDownThroughTheFeed() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-localfeed-\(UUID().uuidString)")
            .resolvingSymlinksInPath()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = folder.appendingPathComponent("store")
        for index in 0..<6 {
            let sub = store.appendingPathComponent("d\(index)")
            try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
            for file in 0..<5 { try Data("\(index)-\(file)".utf8).write(to: sub.appendingPathComponent("f\(file).txt")) }
        }
        let manager = try ProviderManager(home: folder.appendingPathComponent("home"), registry: BackendRegistry([CountedLocal.descriptor]))
        _ = try await manager.addDomain(name: "loc", kind: "counted-local", options: ["root": store.path])
        let server = quietServer(manager, "loc", ServeOptions(pollInterval: 0.2, settleSeconds: 0, debounceSeconds: 0.05))
        let running = Task { try await server.run() }
        let replica = URL(fileURLWithPath: try manager.domain(named: "loc").replicaPath)
        func feedCalls() -> Int { CountedLocal.feedCalls.withLock { $0[store.path] ?? 0 } }
        func listings() -> Int { CountedLocal.listings.withLock { $0[store.path] ?? 0 } }
        do {
            #expect(
                await eventually { FileManager.default.fileExists(atPath: replica.appendingPathComponent("d5/f4.txt.placeholder").path) })
            // Serve polls the feed; once it did, every later poll goes through it.
            #expect(await eventually { feedCalls() >= 2 })
            let listed = listings()
            try Data("new".utf8).write(to: store.appendingPathComponent("d3/new.txt"))
            try FileManager.default.removeItem(at: store.appendingPathComponent("d1/f0.txt"))
            #expect(
                await eventually { FileManager.default.fileExists(atPath: replica.appendingPathComponent("d3/new.txt.placeholder").path) })
            #expect(
                await eventually { !FileManager.default.fileExists(atPath: replica.appendingPathComponent("d1/f0.txt.placeholder").path) })
            #expect(listings() == listed, "the store was listed again (\(listed) → \(listings()) pages)")
        } catch {
            server.stop()
            _ = try? await running.value
            await manager.close()
            throw error
        }
        server.stop()
        try await running.value
        await manager.close()
    }
}
