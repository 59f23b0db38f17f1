import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A store that lies on purpose, over a ``MemoryBackend``: its listings and change feed pass
/// through `lie`, which may add, drop or change what the store really has. Kept apart from the
/// conformance suites, which run against real servers.
struct HostileBackend: ForwardingBackend {
    /// What the hostile store does to a listing page and a change set.
    struct Lies: Sendable {
        var listing: @Sendable (_ container: ItemIdentifier, _ page: ItemPage) -> ItemPage = { $1 }
        var changes: @Sendable (_ changes: ChangeSet) -> ChangeSet = { $0 }
        /// A whole listing the store makes up for a folder, or `nil` to list what it has.
        var invented: @Sendable (_ container: ItemIdentifier) -> [Item]? = { _ in nil }
    }

    let memory: MemoryBackend
    let lies: Lies
    var forwardee: any Backend { memory }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        if let items = lies.invented(container) { return ItemPage(items: items, nextPage: nil) }
        return lies.listing(container, try await memory.enumerateItems(in: container, startingAt: page))
    }

    func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor) async throws(FileProviderError) -> ChangeSet {
        lies.changes(try await memory.enumerateChanges(in: container, from: anchor))
    }

    func close() async {}

    // The stores of the running tests, by name (the descriptor's factory finds them here).
    nonisolated(unsafe) private static var stores: [String: HostileBackend] = [:]
    private static let lock = NSLock()

    static let descriptor = BackendDescriptor(
        kind: "hostile", summary: "a memory store that lies, for tests",
        options: [BackendOption(name: "store", help: "the name of a registered hostile store", isRequired: true)],
        factory: { configuration in
            let name = try configuration.string("store")
            guard let store = lock.withLock({ stores[name] }) else {
                throw FileProviderError(.serverUnreachable, "no hostile store named '\(name)'")
            }
            return store
        })

    /// Runs `body` with a manager whose domain `h` is this store; cleans up after.
    func withDomain<T: Sendable>(_ body: (ProviderManager, DomainController) async throws -> T) async throws -> T {
        let name = UUID().uuidString
        Self.lock.withLock { Self.stores[name] = self }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-hostile-\(name)")
            .resolvingSymlinksInPath()
        defer {
            Self.lock.withLock { Self.stores[name] = nil }
            try? FileManager.default.removeItem(at: folder)
        }
        let manager = try ProviderManager(home: folder.appendingPathComponent("home"), registry: BackendRegistry([Self.descriptor]))
        do {
            try await manager.addDomain(name: "h", kind: "hostile", options: ["store": name], replicaPath: nil)
            let result = try await body(manager, try await manager.controller(for: "h"))
            await manager.close()
            await memory.close()
            return result
        } catch {
            await manager.close()
            await memory.close()
            throw error
        }
    }
}

/// Stores that send impossible numbers, folders inside themselves and moves into a folder's
/// own descendants: sync ends, the good items are recorded, the bad ones are reported and never
/// recorded, nothing traps.
@Suite("Hostile stores (engine)")
struct HostileStoreTests {
    static func file(_ id: String, in parent: ItemIdentifier = .rootContainer, size: Int64 = 4, date: Date? = nil) -> Item {
        Item(
            identifier: ItemIdentifier(id), parentIdentifier: parent, filename: id.split(separator: "/").last.map(String.init) ?? id,
            kind: .file, size: size, contentModificationDate: date,
            version: ItemVersion(content: Data(id.utf8), metadata: Data("m".utf8)))
    }

    @Test func impossibleNumbersAreSkippedWithANoticeAndNeverRecorded() async throws {
        let memory = MemoryBackend(hasChangeFeed: false)
        try memory.write(path: "good.txt", data: Data("good".utf8))
        let lies = HostileBackend.Lies(listing: { container, page in
            guard container == .rootContainer else { return page }
            var page = page
            page.items += [
                Self.file("negative.bin", size: -1), Self.file("huge.bin", size: .max),
                Self.file("nan.txt", date: Date(timeIntervalSince1970: .nan)),
                Self.file("far.txt", date: Date(timeIntervalSince1970: 1e300)),
                Self.file("ancient.txt", date: Date(timeIntervalSince1970: -1e12)),
                Self.file("epoch.txt", date: Date(timeIntervalSince1970: 0)),
            ]
            return page
        })
        try await HostileBackend(memory: memory, lies: lies).withDomain { manager, controller in
            let report = try await controller.sync()
            for name in ["negative.bin", "huge.bin", "nan.txt", "far.txt", "ancient.txt"] {
                #expect(
                    report.notices.contains { $0.hasPrefix("h:/: skipped an item: \"\(name)\"") }, "\(name): \(report.notices)")
            }
            let recorded = try manager.store.descendants(domainID: controller.domainID, of: "").map(\.path)
            #expect(recorded == ["epoch.txt", "good.txt"])
            #expect(try manager.store.descendants(domainID: controller.domainID, of: "").allSatisfy { $0.size >= 0 })
            // A second sync does the same and nothing else.
            let again = try await controller.sync()
            #expect(again.added == 0 && again.deleted == 0)
            #expect(again.notices.filter { $0.contains("skipped an item") }.count == 5)
        }
    }

    @Test func anItemThatTurnsImpossibleIsKeptAsItWas() async throws {
        let memory = MemoryBackend(hasChangeFeed: false)
        try memory.write(path: "docs/a.txt", data: Data("a".utf8))
        let lying = Flag()
        let lies = HostileBackend.Lies(listing: { container, page in
            guard lying.value else { return page }
            var page = page
            page.items = page.items.map { item in
                var item = item
                if item.kind == .folder || item.identifier == "docs/a.txt" { item.size = -5 }
                item.contentModificationDate = Date(timeIntervalSince1970: .infinity)
                return item
            }
            return page
        })
        try await HostileBackend(memory: memory, lies: lies).withDomain { manager, controller in
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["docs/a.txt"], recursive: false)) == [nil])
            lying.value = true
            let report = try await controller.sync()
            #expect(report.notices.contains { $0.contains("skipped an item: \"docs\"") }, "\(report.notices)")
            #expect(report.deleted == 0)
            // The folder and what is below it stay as they were: the file is still downloaded.
            #expect(try controller.record(at: "docs/a.txt").state == .materialized)
            #expect(try controller.record(at: "docs/a.txt").size == 1)
            #expect(try Data(contentsOf: controller.replica.url("docs/a.txt")) == Data("a".utf8))
        }
    }

    /// With identifiers derived from paths, a folder that lists a folder of its own name below
    /// itself is an endless `loop/loop/loop/…`: the walk stops at ``WalkBounds`` depth.
    @Test(.timeLimit(.minutes(10))) func aFolderListedInsideItselfEndsTheWalk() async throws {
        let memory = MemoryBackend(hasChangeFeed: false)
        try memory.write(path: "good.txt", data: Data("good".utf8))
        try memory.mkdir(path: "loop")
        // A bound of its own, far past the engine's, so the test ends even when the engine does not stop.
        let lies = HostileBackend.Lies(invented: { container in
            let path = container.rawValue
            guard path == "loop" || path.hasSuffix("/loop"), path.utf8.count < 3_000 else { return nil }
            return [
                Self.file(path + "/leaf.txt", in: container),
                Item(
                    identifier: ItemIdentifier(path + "/loop"), parentIdentifier: container, filename: "loop", kind: .folder,
                    version: ItemVersion(content: Data("d".utf8), metadata: Data("d".utf8))),
            ]
        })
        try await HostileBackend(memory: memory, lies: lies).withDomain { manager, controller in
            let report = try await controller.sync()
            #expect(
                report.notices.contains { $0.contains("skipped an item: \"loop\" is 257 folders deep; the limit is 256") },
                "\(report.notices.prefix(3))")
            let records = try manager.store.descendants(domainID: controller.domainID, of: "")
            #expect(records.map { $0.path.split(separator: "/").count }.max() == 256)
            #expect(records.contains { $0.path == "good.txt" })
        }
    }

    /// A folder whose listing holds a folder of its own identifier (a store whose identifiers
    /// are not paths) is not walked into again.
    @Test(.timeLimit(.minutes(3))) func aFolderWithItsOwnIdentifierInsideIsNotWalkedAgain() async throws {
        let memory = MemoryBackend(hasChangeFeed: false)
        try memory.mkdir(path: "a")
        try memory.write(path: "a/b/inner.txt", data: Data("i".utf8))
        let lies = HostileBackend.Lies(listing: { container, page in
            guard container == "a/b" else { return page }
            var page = page
            page.items.append(
                Item(
                    identifier: "a", parentIdentifier: "a/b", filename: "again", kind: .folder,
                    version: ItemVersion(content: Data("d".utf8), metadata: Data("d".utf8))))
            return page
        })
        try await HostileBackend(memory: memory, lies: lies).withDomain { manager, controller in
            let report = try await controller.sync()
            #expect(
                report.notices.contains { $0.contains("h:/a/b: skipped an item: the folder \"again\" is listed inside itself") },
                "\(report.notices)")
            let paths = try manager.store.descendants(domainID: controller.domainID, of: "").map(\.path)
            #expect(paths == ["a", "a/b", "a/b/inner.txt"])
            #expect(try controller.record(at: "a").identifier == "a")
        }
    }

    /// A name that would make a path longer than PATH_MAX in the replica is refused as unsafe.
    @Test func aPathPastPathMaxIsRefused() async throws {
        let memory = MemoryBackend(hasChangeFeed: false)
        let long = String(repeating: "d", count: 250)
        var path = ""
        for _ in 0..<17 { path += (path.isEmpty ? "" : "/") + long }
        try memory.write(path: path + "/deep.txt", data: Data("x".utf8))
        try memory.write(path: "short.txt", data: Data("x".utf8))
        try await HostileBackend(memory: memory, lies: .init()).withDomain { manager, controller in
            // Folders left dataless are recorded without being made: only the bound stops them.
            let report = try await controller.sync(populationBudget: 0)
            #expect(report.notices.contains { $0.contains("bytes long; the limit is 4095 (PATH_MAX)") }, "\(report.notices)")
            let records = try manager.store.descendants(domainID: controller.domainID, of: "")
            #expect(records.allSatisfy { controller.replica.path($0.path).utf8.count <= 4095 })
            #expect(records.contains { $0.path == "short.txt" })
        }
    }

    /// A file in the replica dated after 2262 (more nanoseconds than 64 bits hold; `touch` can
    /// make one) is scanned without a trap; the store refuses such a date, so it stays local
    /// with a notice.
    @Test func aReplicaFileDatedPast2262DoesNotTrap() async throws {
        let memory = MemoryBackend(hasChangeFeed: false)
        try await HostileBackend(memory: memory, lies: .init()).withDomain { manager, controller in
            try await controller.sync()
            let url = controller.replica.url("future.txt")
            try Data("from the future".utf8).write(to: url)
            var times = [timespec(tv_sec: 10_413_792_000, tv_nsec: 0), timespec(tv_sec: 10_413_792_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, url.path, &times, 0) == 0)
            let report = try await controller.sync()
            #expect(report.notices.contains { $0.contains("future.txt") }, "\(report.notices)")
            #expect(try Data(contentsOf: url) == Data("from the future".utf8))
        }
    }

    /// A change feed that moves a folder into a folder below it is refused; the database keeps
    /// the tree as it was.
    @Test func aFeedMovingAFolderIntoItselfIsRefused() async throws {
        let memory = MemoryBackend(hasChangeFeed: true)
        try memory.write(path: "x/y/f.txt", data: Data("f".utf8))
        let lie = LieMode()
        let lies = HostileBackend.Lies(changes: { changes in
            let folder = ItemVersion(content: Data("d".utf8), metadata: Data("d".utf8))
            var changes = changes
            switch lie.value {
            case 1: changes.updatedItems = [Item(identifier: "x", parentIdentifier: "x/y", filename: "x", kind: .folder, version: folder)]
            case 2: changes.updatedItems = [Item(identifier: "x/y", parentIdentifier: "x/y", filename: "y", kind: .folder, version: folder)]
            default: break
            }
            return changes
        })
        try await HostileBackend(memory: memory, lies: lies).withDomain { manager, controller in
            try await controller.sync()
            try memory.write(path: "other.txt", data: Data("o".utf8))
            lie.value = 1
            let moved = try await controller.sync()
            #expect(moved.notices.contains { $0.contains("skipped an item: the folder \"x\" would move into itself") }, "\(moved.notices)")
            lie.value = 2
            try memory.write(path: "another.txt", data: Data("o".utf8))
            let own = try await controller.sync()
            #expect(own.notices.contains { $0.contains("skipped an item: \"y\" is named as its own folder") }, "\(own.notices)")
            let paths = try manager.store.descendants(domainID: controller.domainID, of: "").map(\.path)
            #expect(paths == ["x", "x/y", "x/y/f.txt"])
            #expect(entry(at: controller.replica.url("x/y")) == .folder)
        }
    }
}

/// A value shared with a lying store's closures.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = false
    var value: Bool {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// A number shared with a lying store's closures.
final class LieMode: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 0
    var value: Int {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
