import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import Testing

/// A backend with a change feed over any backend that has none: an anchor is a snapshot of the
/// whole store (taken by walking it), and the changes since an anchor are the differences
/// between its snapshot and a new one. Only for tests: it lets the chaos suite drive the
/// engine's change-feed path against a real folder that a third hand edits directly.
final class SnapshotFeedBackend: ForwardingBackend, @unchecked Sendable {
    let forwardee: any Backend
    private let lock = NSLock()
    private var snapshots: [UInt64: [ItemIdentifier: Item]] = [:]
    private var next: UInt64 = 1

    init(base: any Backend) { forwardee = base }

    var capabilities: BackendCapabilities {
        var capabilities = forwardee.capabilities
        capabilities.hasChangeFeed = true
        return capabilities
    }

    func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor {
        guard container == .workingSet else { throw FileProviderError(.notSupported, "only the working set has a feed") }
        return remember(try await snapshot())
    }

    func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor) async throws(FileProviderError) -> ChangeSet {
        guard container == .workingSet else { throw FileProviderError(.notSupported, "only the working set has a feed") }
        let number = anchor.rawValue.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        guard anchor.rawValue.count == 8, let old = lock.withLock({ snapshots[number] }) else {
            throw FileProviderError(.syncAnchorExpired, "unknown anchor")
        }
        let now = try await snapshot()
        var updated: [Item] = []
        for (identifier, item) in now {
            if let before = old[identifier], before.version == item.version, before.parentIdentifier == item.parentIdentifier,
                before.filename == item.filename
            {
                continue
            }
            updated.append(item)
        }
        let deleted = old.keys.filter { now[$0] == nil }
        return ChangeSet(updatedItems: updated.shuffled(), deletedIdentifiers: deleted, newAnchor: remember(now), moreComing: false)
    }

    private func remember(_ snapshot: [ItemIdentifier: Item]) -> SyncAnchor {
        let number = lock.withLock { () -> UInt64 in
            defer { next += 1 }
            snapshots[next] = snapshot
            return next
        }
        return SyncAnchor(withUnsafeBytes(of: number) { Data($0) })
    }

    private func snapshot() async throws(FileProviderError) -> [ItemIdentifier: Item] {
        var all: [ItemIdentifier: Item] = [:]
        var queue: [ItemIdentifier] = [.rootContainer]
        while let folder = queue.popLast() {
            for var item in try await forwardee.enumerateAllItems(in: folder) {
                item.parentIdentifier = folder
                all[item.identifier] = item
                if item.kind == .folder { queue.append(item.identifier) }
            }
        }
        return all
    }
}

extension ChaosStore {
    /// A local folder whose domains see it through ``SnapshotFeedBackend``: every sync after the
    /// first follows the change feed.
    static func localWithFeed(in folder: URL) throws -> ChaosStore {
        var store = try local(in: folder)
        store.label = "local-feed"
        store.kind = "local-feed"
        store.registry = BackendRegistry([
            BackendDescriptor(
                kind: "local-feed", summary: "a local folder with a snapshot change feed",
                options: [BackendOption(name: "root", help: "the folder", type: .path, isRequired: true)],
                factory: { configuration in
                    SnapshotFeedBackend(base: try LocalBackend(rootPath: try configuration.string("root"), threads: 1))
                })
        ])
        return store
    }
}

/// The two-device chaos experiment of ``ConvergenceTests`` with sync down following a change
/// feed (moves, deletions of whole folders, edits on all sides), with the same checks.
@Suite struct FeedConvergenceTests {
    static let seeds = chaosSeeds(default: [201, 202])

    @Test(arguments: seeds)
    func twoDevicesFollowingAChangeFeedConverge(seed: UInt64) async throws {
        try await ChaosWorld.experiment(seed: seed, steps: chaosSetting("CHAOS_STEPS", default: 220), store: ChaosStore.localWithFeed(in:))
    }
}
