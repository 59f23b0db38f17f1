import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// The "remote" side of one test: a shared ``MemoryBackend`` plus faults the memory backend
/// cannot produce itself (a listing failure of one folder, items with unsafe names).
final class TestRemote: @unchecked Sendable {
    let memory: MemoryBackend
    private let lock = NSLock()
    private var failingFolders: [ItemIdentifier: FileProviderError] = [:]
    private var extraItems: [ItemIdentifier: [Item]] = [:]
    private var pending: (fields: ItemFields, times: Int) = ([], 0)
    private var createHooks: [@Sendable () -> Void] = []
    private var backendInPlace: (any Backend)?

    init(memory: MemoryBackend = MemoryBackend(hasChangeFeed: false, pageSize: 7)) {
        self.memory = memory
    }

    /// Makes domains of this remote talk to `backend` instead of ``memory`` (a store with
    /// identifiers of its own over the same memory, ``OpaqueIdentifierBackend``).
    func serve(through backend: any Backend) {
        lock.withLock { backendInPlace = backend }
    }

    fileprivate var backend: (any Backend)? { lock.withLock { backendInPlace } }

    /// Makes listings of `folder` fail with `error` (`nil` to stop).
    func failListing(of folder: ItemIdentifier, with error: FileProviderError?) {
        lock.withLock { failingFolders[folder] = error }
    }

    /// Adds items to the first listing page of `folder`, as a broken or hostile server would.
    func inject(_ items: [Item], into folder: ItemIdentifier) {
        lock.withLock { extraItems[folder, default: []] += items }
    }

    /// Makes the next `times` creates and changes report `fields` as still pending, as a store
    /// that takes an item but not yet all of it does. A change whose name or folder is pending
    /// is not made at all.
    func reportPending(_ fields: ItemFields, times: Int = 1) {
        lock.withLock { pending = (fields, times) }
    }

    /// Runs `hook` once, just before the next `createItem` reaches the store: a moment between
    /// a sync's scan and its later operations, for another process's hand.
    func beforeCreate(_ hook: @escaping @Sendable () -> Void) {
        lock.withLock { createHooks.append(hook) }
    }

    fileprivate func takeCreateHooks() -> [@Sendable () -> Void] {
        lock.withLock {
            defer { createHooks.removeAll() }
            return createHooks
        }
    }

    fileprivate func takePending() -> ItemFields {
        lock.withLock {
            guard pending.times > 0 else { return [] }
            pending.times -= 1
            return pending.fields
        }
    }

    fileprivate func listingFailure(_ folder: ItemIdentifier) -> FileProviderError? {
        lock.withLock { failingFolders[folder] }
    }

    fileprivate func extras(_ folder: ItemIdentifier) -> [Item] {
        lock.withLock { extraItems[folder] ?? [] }
    }

    // MARK: The registry of remotes, by name

    nonisolated(unsafe) private static var byName: [String: TestRemote] = [:]
    private static let registryLock = NSLock()

    static func register(_ remote: TestRemote, as name: String) {
        registryLock.withLock { byName[name] = remote }
    }

    static func unregister(_ name: String) {
        registryLock.withLock { byName[name] = nil }
    }

    static func named(_ name: String) -> TestRemote? {
        registryLock.withLock { byName[name] }
    }

    /// The `memory` kind: option `store` names a registered remote; `root` and `spool` are path
    /// options marked as where the store keeps its data, `key-file` a path option that is not
    /// (all unused by the backend), so the engine's replica-overlap check and its path
    /// normalisation can be exercised.
    static let descriptor = BackendDescriptor(
        kind: "memory", summary: "a shared in-memory store for engine tests",
        options: [
            BackendOption(name: "store", help: "the name of a registered TestRemote", isRequired: true),
            BackendOption(name: "root", help: "a path the store claims to serve", type: .path, isStoreLocation: true),
            BackendOption(name: "spool", help: "another folder the store keeps data in", type: .path, isStoreLocation: true),
            BackendOption(name: "key-file", help: "a file the store reads, not a store location", type: .path),
        ],
        factory: { configuration in
            let name = try configuration.string("store")
            guard let remote = TestRemote.named(name) else {
                throw FileProviderError(.serverUnreachable, "no test remote named '\(name)'")
            }
            return remote.backend ?? TestBackend(remote: remote)
        })

    static var registry: BackendRegistry { BackendRegistry([descriptor]) }
}

/// A test backend that hands every call to another backend unless it says otherwise.
protocol ForwardingBackend: Backend {
    var forwardee: any Backend { get }
}

extension ForwardingBackend {
    var capabilities: BackendCapabilities { forwardee.capabilities }

    func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        try await forwardee.item(for: identifier)
    }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        try await forwardee.enumerateItems(in: container, startingAt: page)
    }

    func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor {
        try await forwardee.currentSyncAnchor(for: container)
    }

    func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor) async throws(FileProviderError) -> ChangeSet {
        try await forwardee.enumerateChanges(in: container, from: anchor)
    }

    func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        try await forwardee.fetchContents(for: identifier, version: version, to: destination, offset: offset, progress: progress)
    }

    func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try await forwardee.fetchPartialContents(for: identifier, version: version, range: range, into: destination)
    }

    func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        try await forwardee.createItem(basedOn: template, fields: fields, contents: contents, options: options)
    }

    func modifyItem(_ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions)
        async throws(FileProviderError) -> ItemResult
    {
        try await forwardee.modifyItem(item, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options)
    }

    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions) async throws(FileProviderError) {
        try await forwardee.deleteItem(identifier: identifier, baseVersion: baseVersion, options: options)
    }

    func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError) -> Data {
        try await forwardee.fetchThumbnail(for: identifier, size: size)
    }

    func close() async { await forwardee.close() }
}

/// Forwards to the shared ``MemoryBackend``, with the remote's injected listing faults;
/// `close()` keeps it open (the engine closes the backend it made for `addDomain`, and the
/// memory backend stops its threads on close).
struct TestBackend: ForwardingBackend {
    let remote: TestRemote
    var forwardee: any Backend { remote.memory }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        if let error = remote.listingFailure(container) { throw error }
        var result = try await remote.memory.enumerateItems(in: container, startingAt: page)
        if page.isInitial { result.items += remote.extras(container) }
        return result
    }

    func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        for hook in remote.takeCreateHooks() { hook() }
        var result = try await remote.memory.createItem(basedOn: template, fields: fields, contents: contents, options: options)
        result.stillPendingFields = remote.takePending()
        return result
    }

    func modifyItem(_ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let pending = remote.takePending()
        if !pending.isDisjoint(with: [.filename, .parentItemIdentifier]) {
            return ItemResult(item: try await remote.memory.item(for: item.identifier), stillPendingFields: pending)
        }
        var result = try await remote.memory.modifyItem(
            item, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options)
        result.stillPendingFields = pending
        return result
    }

    func close() async {}
}

/// One engine test: a fresh temporary home, a manager and a registered remote. The remote has
/// no change feed unless the test gives one (``ChangeFeedTests``): most tests are about walks.
struct Fixture: Sendable {
    let folder: URL
    let home: URL
    let manager: ProviderManager
    let remote: TestRemote
    let remoteName: String

    var memory: MemoryBackend { remote.memory }

    init(memory: MemoryBackend = MemoryBackend(hasChangeFeed: false, pageSize: 7), spaceReserve: SpaceReserve = .standard) throws {
        enforcePoolRule()
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-engine-\(UUID().uuidString)")
            .resolvingSymlinksInPath()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        home = folder.appendingPathComponent("home")
        remoteName = UUID().uuidString
        remote = TestRemote(memory: memory)
        TestRemote.register(remote, as: remoteName)
        manager = try ProviderManager(home: home, registry: TestRemote.registry, spaceReserve: spaceReserve)
    }

    /// Runs `body` with a fixture, then closes the manager and removes the folder.
    static func with<T: Sendable>(
        memory: MemoryBackend = MemoryBackend(hasChangeFeed: false, pageSize: 7), spaceReserve: SpaceReserve = .standard,
        _ body: (Fixture) async throws -> T
    ) async throws -> T {
        let fixture = try Fixture(memory: memory, spaceReserve: spaceReserve)
        do {
            let result = try await body(fixture)
            await fixture.tearDown()
            return result
        } catch {
            await fixture.tearDown()
            throw error
        }
    }

    func tearDown() async {
        await manager.close()
        await memory.close()
        TestRemote.unregister(remoteName)
        try? FileManager.default.removeItem(at: folder)
    }

    /// Adds a memory domain over this fixture's remote and returns its controller.
    @discardableResult
    func addDomain(
        _ name: String = "mem", replica: String? = nil, extra: [String: String] = [:], mode: ReplicaMode = .placeholderFiles
    ) async throws -> DomainController {
        try await manager.addDomain(
            name: name, kind: "memory", options: ["store": remoteName].merging(extra) { a, _ in a }, replicaPath: replica, mode: mode)
        return try await manager.controller(for: name)
    }

    /// The replica URL of a path in a controller's domain.
    func url(_ controller: DomainController, _ path: String) -> URL { controller.replica.url(path) }

    func placeholderURL(_ controller: DomainController, _ path: String) -> URL {
        URL(fileURLWithPath: controller.replica.placeholderPath(path))
    }
}

/// Turns on `PoolCheck`'s strict mode for this test process: a blocking call (a database
/// transaction, a replica file operation) on the cooperative pool inside an engine operation
/// (a sync, a materialize, `serve`, an on-access fill, ...) records an issue on the test that
/// runs it. Every ``Fixture`` turns it on; it stays on.
func enforcePoolRule() {
    PoolCheck.enforce { message in Issue.record(Comment(rawValue: message)) }
}

/// What is at a URL, not following symlinks.
enum Entry: Equatable {
    case none, file, folder, other
}

func entry(at url: URL) -> Entry {
    var info = stat()
    guard lstat(url.path, &info) == 0 else { return .none }
    switch info.st_mode & S_IFMT {
    case S_IFREG: return .file
    case S_IFDIR: return .folder
    default: return .other
    }
}

/// Every path below a folder, relative, sorted; folders end in "/".
func tree(at root: URL) -> [String] {
    var result: [String] = []
    func walk(_ url: URL, _ prefix: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        for name in names {
            let child = url.appendingPathComponent(name)
            if entry(at: child) == .folder {
                result.append(prefix + name + "/")
                walk(child, prefix + name + "/")
            } else {
                result.append(prefix + name)
            }
        }
    }
    walk(root, "")
    return result.sorted()
}

/// Reads and decodes a placeholder file.
func placeholder(at url: URL) throws -> PlaceholderMetadata {
    let data = try Data(contentsOf: url)
    return try JSONDecoder().decode(PlaceholderMetadata.self, from: data)
}

/// Deterministic pseudo-random bytes.
func bytes(_ count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9e37_79b9_7f4a_7c15
    var out = [UInt8](repeating: 0, count: count)
    for index in 0..<count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        out[index] = UInt8(truncatingIfNeeded: state >> 33)
    }
    return Data(out)
}

/// Fails unless `body` throws a `FileProviderError` with `code`.
func expectCode<T>(
    _ code: FileProviderError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
) async {
    do {
        _ = try await body()
        Issue.record("expected \(code.name), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as FileProviderError {
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected FileProviderError \(code.name), got \(error)", sourceLocation: sourceLocation)
    }
}

/// The single outcome's error code, or `nil` when it worked.
func codes(_ outcomes: [ItemOutcome]) -> [FileProviderError.Code?] { outcomes.map { $0.error?.code } }

/// A one-shot gate tasks can wait on.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }
}
