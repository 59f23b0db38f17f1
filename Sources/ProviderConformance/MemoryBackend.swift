import Foundation
import ProviderCore

/// An in-memory ``Backend`` with a change feed, for engine tests.
///
/// Identifiers are derived from paths as in the local backend (`docs/a.txt`; the root is
/// ``ItemIdentifier/rootContainer``). Besides the `Backend` contract it offers test hooks:
/// inject errors per operation (``setFailure(_:for:times:)``), run code before an operation
/// (``setHook(for:_:)``), count calls, and change the store "remotely" (``write(path:data:modificationDate:)``,
/// ``mkdir(path:)``, ``remove(path:)``, ``rename(from:to:)``) so the changes appear in the feed.
public final class MemoryBackend: Backend, @unchecked Sendable {
    /// The operations hooks and failures can target.
    public enum Operation: String, Hashable, Sendable, CaseIterable {
        case item, enumerateItems, currentSyncAnchor, enumerateChanges, fetchContents, fetchPartialContents,
            createItem, modifyItem, deleteItem, fetchThumbnail
    }

    /// Runs before an operation; it may suspend (to hold a transfer open) before the operation goes on.
    public typealias Hook = @Sendable (_ identifier: ItemIdentifier?) async -> Void

    public let capabilities: BackendCapabilities
    /// The most items one listing page holds.
    public let pageSize: Int
    /// The most change-log entries one `enumerateChanges` call covers before `moreComing`.
    public let changeBatchSize: Int

    private let lock = NSLock()
    private var tree: MemoryTree
    private var failures: [Operation: (error: FileProviderError, remaining: Int)] = [:]
    private var hooks: [Operation: Hook] = [:]
    private var calls: [Operation: Int] = [:]
    private var served: [Operation: Int64] = [:]
    /// Tells anchors of this store apart from anchors of another store.
    let epoch = UUID()
    let executor = BlockingExecutor(name: "memory-backend", threads: 2)

    /// Makes an empty store.
    ///
    /// - Parameters:
    ///   - hasChangeFeed: whether `currentSyncAnchor`/`enumerateChanges` work; without it they
    ///     throw `notSupported`, to test the engine's listing comparison.
    ///   - pageSize: the most items per listing page (small by default so paging is exercised).
    ///   - changeLogLimit: how many changes the feed remembers; older anchors expire.
    ///   - changeBatchSize: the most log entries one `enumerateChanges` call returns.
    ///   - supportsServerSideMove: without it, a rename or move throws `notSupported` (a store
    ///     such as the media API's original dialect).
    ///   - creatableKinds: the kinds `createItem` accepts; it throws `notSupported` for the others
    ///     (a store such as WebDAV, which cannot hold symlinks).
    ///   - maximumUploadSize: the largest file `createItem` and `modifyItem` accept; a larger one
    ///     is read in full and then refused with `notSupported`, as a server that refuses a body
    ///     after receiving it.
    ///   - anchorsOutliveProcess: ``BackendCapabilities/anchorsOutliveProcess`` (false: a store
    ///     whose feed lives in the process, as the local store's).
    ///   - concurrentTransfers: ``BackendCapabilities/concurrentTransfers``.
    public init(
        hasChangeFeed: Bool = true, pageSize: Int = 100, changeLogLimit: Int = 10_000, changeBatchSize: Int = 500,
        supportsServerSideMove: Bool = true, creatableKinds: Set<ItemKind> = [.file, .folder, .symlink],
        maximumUploadSize: Int64? = nil, anchorsOutliveProcess: Bool = true, concurrentTransfers: Int? = nil
    ) {
        precondition(pageSize > 0 && changeBatchSize > 0 && changeLogLimit > 0)
        capabilities = BackendCapabilities(
            hasChangeFeed: hasChangeFeed, supportsThumbnails: false, supportsRangedReads: true,
            supportsServerSideMove: supportsServerSideMove, supportsConditionalWrites: true, supportsSymlinks: true,
            creatableKinds: creatableKinds, maximumUploadSize: maximumUploadSize, identifiersArePathDerived: true,
            anchorsOutliveProcess: anchorsOutliveProcess, concurrentTransfers: concurrentTransfers)
        self.pageSize = pageSize
        self.changeBatchSize = changeBatchSize
        tree = MemoryTree(logLimit: changeLogLimit)
    }

    deinit { executor.shutDown() }

    public func close() async { executor.shutDown() }

    func withTree<T>(_ body: (inout MemoryTree) throws(FileProviderError) -> T) throws(FileProviderError) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&tree)
    }

    // MARK: Test hooks

    /// Makes an operation fail with `error` for its next `times` calls (every call by default);
    /// `nil` removes the failure.
    public func setFailure(_ error: FileProviderError?, for operation: Operation, times: Int = .max) {
        lock.withLock {
            failures[operation] = error.map { ($0, times) }
        }
    }

    /// Runs `hook` at the start of every call of an operation (before injected failures); `nil`
    /// removes it.
    public func setHook(for operation: Operation, _ hook: Hook?) {
        lock.withLock { hooks[operation] = hook }
    }

    /// How many times an operation was called.
    public func callCount(_ operation: Operation) -> Int {
        lock.withLock { calls[operation, default: 0] }
    }

    /// How many content bytes an operation (`fetchContents`, `fetchPartialContents`) wrote into
    /// destinations so far.
    public func bytesServed(by operation: Operation) -> Int64 {
        lock.withLock { served[operation, default: 0] }
    }

    func countServed(_ count: Int64, by operation: Operation) {
        lock.withLock { served[operation, default: 0] += count }
    }

    /// Counts the call, runs the hook and throws an injected failure.
    func begin(_ operation: Operation, _ identifier: ItemIdentifier?) async throws(FileProviderError) {
        let hook = lock.withLock { () -> Hook? in
            calls[operation, default: 0] += 1
            return hooks[operation]
        }
        if let hook { await hook(identifier) }
        let failure = lock.withLock { () -> FileProviderError? in
            guard let (error, remaining) = failures[operation] else { return nil }
            failures[operation] = remaining > 1 ? (error, remaining - 1) : nil
            return error
        }
        if let failure { throw failure }
        if Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
    }

    // MARK: Remote changes

    /// Writes a file as another client of the store would, creating missing folders on the way.
    ///
    /// - Throws: `invalidFilename` for an unsafe path component; `filenameCollision` when a
    ///   component on the way or the path itself is not of the right kind.
    @discardableResult
    public func write(path: String, data: Data, modificationDate: Date? = nil) throws(FileProviderError) -> Item {
        try withTree { (tree) throws(FileProviderError) -> Item in
            let key = try Self.makeParents(of: path, in: &tree)
            if let node = tree.nodes[key] {
                guard node.kind == .file else { throw FileProviderError(.filenameCollision, "\(path) is not a file") }
                tree.setContents(key, data: data, date: modificationDate)
            } else {
                tree.insert(key, kind: .file, data: data, date: modificationDate)
            }
            return try tree.existingItem(at: key)
        }
    }

    /// Creates a folder (and missing folders on the way) as another client would.
    ///
    /// - Throws: `invalidFilename` for an unsafe component; `filenameCollision` when something
    ///   other than a folder is in the way.
    @discardableResult
    public func mkdir(path: String) throws(FileProviderError) -> Item {
        try withTree { (tree) throws(FileProviderError) -> Item in
            let key = try Self.makeParents(of: path, in: &tree)
            if let node = tree.nodes[key] {
                guard node.kind == .folder else { throw FileProviderError(.filenameCollision, "\(path) is not a folder") }
            } else {
                tree.insert(key, kind: .folder)
            }
            return try tree.existingItem(at: key)
        }
    }

    /// Creates a symlink as another client would.
    ///
    /// - Throws: `invalidFilename` for an unsafe component; `filenameCollision` when the path is taken.
    @discardableResult
    public func symlink(path: String, target: String) throws(FileProviderError) -> Item {
        try withTree { (tree) throws(FileProviderError) -> Item in
            let key = try Self.makeParents(of: path, in: &tree)
            if tree.nodes[key] != nil { throw FileProviderError(.filenameCollision, "\(path) exists") }
            tree.insert(key, kind: .symlink, target: target)
            return try tree.existingItem(at: key)
        }
    }

    /// Removes an item and everything in it as another client would.
    ///
    /// - Throws: `noSuchItem` when nothing is at `path`.
    public func remove(path: String) throws(FileProviderError) {
        try withTree { (tree) throws(FileProviderError) in
            let key = try MemoryTree.key(for: ItemIdentifier(path))
            guard !key.isEmpty, tree.nodes[key] != nil else { throw .noSuchItem(ItemIdentifier(path)) }
            tree.remove(key)
        }
    }

    /// Renames or moves an item as another client would.
    ///
    /// - Throws: `noSuchItem` when the item or the new parent is missing; `filenameCollision`
    ///   when the new path is taken.
    @discardableResult
    public func rename(from path: String, to newPath: String) throws(FileProviderError) -> Item {
        try withTree { (tree) throws(FileProviderError) -> Item in
            let key = try MemoryTree.key(for: ItemIdentifier(path))
            let newKey = try MemoryTree.key(for: ItemIdentifier(newPath))
            guard !key.isEmpty, tree.nodes[key] != nil else { throw .noSuchItem(ItemIdentifier(path)) }
            guard tree.nodes[MemoryTree.parent(of: newKey)]?.kind == .folder else {
                throw .noSuchItem(MemoryTree.identifier(for: MemoryTree.parent(of: newKey)))
            }
            if tree.nodes[newKey] != nil { throw FileProviderError(.filenameCollision, "\(newPath) exists") }
            tree.move(key, to: newKey)
            return try tree.existingItem(at: newKey)
        }
    }

    /// The bytes of a file, or `nil` when no file is at `path`.
    public func contents(of path: String) -> Data? {
        lock.withLock {
            guard let key = try? MemoryTree.key(for: ItemIdentifier(path)), let node = tree.nodes[key],
                node.kind == .file
            else { return nil }
            return node.data
        }
    }

    /// Every identifier in the store except the root, sorted by bytes.
    public var allIdentifiers: [ItemIdentifier] {
        lock.withLock {
            tree.nodes.keys.filter { !$0.isEmpty }.sorted { $0.lexicographicallyPrecedes($1) }
                .map(MemoryTree.identifier(for:))
        }
    }

    /// Forgets the change log: every anchor handed out so far throws `syncAnchorExpired`.
    public func expireAnchors() {
        lock.withLock { tree.forgetLog() }
    }

    private static func makeParents(of path: String, in tree: inout MemoryTree) throws(FileProviderError) -> MemoryTree.Key {
        var key = MemoryTree.rootKey
        let names = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !names.isEmpty else { throw FileProviderError(.invalidFilename, "an empty path") }
        for (index, name) in names.enumerated() {
            key = try MemoryTree.childKey(named: name, in: key)
            if index == names.count - 1 { break }
            if let node = tree.nodes[key] {
                guard node.kind == .folder else { throw FileProviderError(.filenameCollision, "\(name) is not a folder") }
            } else {
                tree.insert(key, kind: .folder)
            }
        }
        return key
    }
}
