import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

/// Runs one domain: sync, materialize, evict, pin. Safe to use from many tasks at once;
/// requests to materialize the same item share one download.
///
/// A facade, as Apple's `NSFileProviderManager` is: it takes the domain's locks and hands the
/// work to parts with one job each over one ``DomainContext``: the ``RecordReader`` (the records
/// a command acts on), the ``Downloader`` (downloads into the replica), sync up's ``SyncUp``
/// (scan, journal, conflicts, uploads) and sync down's ``SyncDown`` (listings, placeholders,
/// records, due downloads).
public final class DomainController: Sendable {
    /// What the domain's parts share: the domain, its store, its replica, the database, the executor.
    let context: DomainContext
    public var domain: DomainRecord { context.domain }
    public var domainID: Int64 { context.domainID }
    /// The domain's store, wrapped in ``CheckedBackend``.
    public var backend: any Backend { context.backend }
    public var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    let logger: Logger
    /// Reads the records commands act on: at the paths they name, and subtrees a page at a time.
    let reader: RecordReader
    /// Downloads files into the replica: materialize, sync's due downloads, conflicts.
    let downloader: Downloader
    /// Records when files were used (a `materialize` counts), for least-recently-used eviction.
    public let useRecorder: UseRecorder
    /// Sync and the population of dataless folders take turns: a folder populated while sync
    /// down decides what to write into it would miss the new items of the listing.
    let treeLock = AsyncLock()
    /// Sync up: the local scan, the journal, conflicts and uploads.
    let syncUp: SyncUp
    /// Names never uploaded from this domain's replica.
    public var ignoreRules: IgnoreRules { syncUp.ignoreRules }
    /// How many downloads run at once in a batch.
    public let downloadDepth: Int
    /// How long the domain waits after failures that back it off.
    public let backoffPolicy: BackoffPolicy
    /// Files a watcher saw finished being written: uploaded without waiting for the settle time.
    public var finishedWrites: FinishedWrites { syncUp.finishedWrites }
    /// Sync down, for one sync: the walk or the change feed, the replica's placeholders and
    /// moves, the records, the due downloads.
    var syncDown: SyncDown {
        SyncDown(
            context: context, downloader: downloader, downloadDepth: downloadDepth, feedAnchor: feedAnchor,
            populateFolder: { [self] (path) async throws(FileProviderError) in try await populateFolder(path, ancestors: true) },
            evictUpdated: { [self] records, policies, report in await evictUpdated(records, policies: policies, report: &report) })
    }
    /// How many new files and edits go to the store at once.
    public static let uploadDepth = SyncUp.uploadDepth
    /// The domain's sync lock and serve lock files (see ``DomainLock``).
    let syncLockPath: String
    let serveLockPath: String
    /// The marker of an unfinished conversion of the domain's replica mode (see
    /// ``ProviderManager/convertDomain(named:to:events:)``).
    let conversionMarkerPath: String
    /// The change-feed anchor this controller last stored: an expired anchor it did not get
    /// from its own backend (an earlier process's) is expected, and not reported.
    let feedAnchor = Mutex<SyncAnchor?>(nil)
    /// Records a recursive operation reads from the database at once (tests make it small).
    var subtreePage: Mutex<Int> { context.subtreePage }

    init(domain: DomainRecord, backend: any Backend, manager: ProviderManager, downloadDepth: Int = 8) throws(FileProviderError) {
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(domain.name) has no id") }
        // Every item from the store passes ItemBounds before the engine uses it.
        let backend = CheckedBackend(backend)
        let store = manager.store
        let executor = manager.executor
        logger = manager.logger
        useRecorder = manager.useRecorder
        self.downloadDepth = downloadDepth
        backoffPolicy = manager.backoffPolicy
        syncLockPath = DomainLock.syncPath(home: manager.home, domain: domain.name)
        serveLockPath = DomainLock.path(home: manager.home, domain: domain.name)
        conversionMarkerPath = manager.conversionMarkerPath(forDomainNamed: domain.name)
        // Where the engine reads and writes the files: the replica folder, or a dataless
        // domain's backing folder (never the replica path, which serve marks with fanotify).
        let replicaRoot = try manager.replicaRoot(of: domain)
        var staging = manager.home.appendingPathComponent("staging/\(id)")
        let inHome = Self.sameDevice(manager.home.path, replicaRoot.path)
        if !inHome {
            staging = replicaRoot.appendingPathComponent(".fileprovider-staging")
        }
        do {
            // In the state folder: private, as the state folder is.
            if inHome {
                try PrivateFolder.make(atPath: staging.path)
            } else {
                try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            }
        } catch {
            throw FileProviderError(
                .localIOFailure, "cannot create the staging folder \(staging.path): \(FileProviderError.wrap(error).message)")
        }
        let replica = Replica(root: replicaRoot, staging: staging, layout: ReplicaLayouts.layout(of: domain))
        context = DomainContext(
            domain: domain, domainID: id, backend: backend, replica: replica, store: store, executor: executor,
            newDatalessFolders: manager.newDatalessFolders, logger: manager.logger)
        reader = RecordReader(context: context)
        downloader = Downloader(
            domainID: id, domainName: domain.name, backend: backend, replica: replica, store: store, executor: executor,
            depth: downloadDepth, space: manager.spaceReservations)
        syncUp = SyncUp(context: context, downloader: downloader, ignoreRules: IgnoreRules(extra: domain.ignoreList))
    }

    /// Runs a short blocking step on the engine's executor, also when the task is cancelled
    /// (``DomainContext/blocking(_:)``).
    /// - Throws: what `body` throws.
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await context.blocking(body)
    }

    private static func sameDevice(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        guard stat(a, &first) == 0, stat(b, &second) == 0 else { return false }
        return first.st_dev == second.st_dev
    }

    func close() async {
        await backend.close()
    }

    /// `DOMAIN:/path` of a relative path, exactly: for outcomes, JSON and keys.
    func location(_ path: String) -> String { context.location(path) }

    /// `DOMAIN:/path` of a relative path for messages and logs: quoted when the name holds
    /// characters that must not reach a terminal (``TerminalText/quoted(_:)``).
    func display(_ path: String) -> String { context.display(path) }

    /// The stored item at a path.
    /// - Throws: `noSuchItem` saying how to refresh; `localIOFailure` when the database fails.
    public func record(at path: String) throws(FileProviderError) -> ItemRecord {
        try reader.record(at: path)
    }

    /// The items directly inside a folder, or the item itself when it is not a folder; with
    /// `recursive`, every item below the folder, in path order, in one array (for tests and
    /// small trees: the engine's recursive operations read a subtree in pages instead, see
    /// ``RecordReader/forEachSubtreePage(below:deepestFirst:_:)``).
    public func list(at path: String, recursive: Bool) throws(FileProviderError) -> [ItemRecord] {
        let target = try record(at: path)
        guard target.kind == .folder else { return [target] }
        if recursive { return try store.descendants(domainID: domainID, of: path) }
        return try store.children(domainID: domainID, parent: target.identifier)
    }

    /// Whether an item or one of its ancestor folders (the root too) is pinned.
    public func isEffectivelyPinned(_ record: ItemRecord) throws(FileProviderError) -> Bool {
        try pinHolder(of: record) != nil
    }

    /// `persistentIdentifierForItem(at:)`: the identifier of the item at a replica URL (its real
    /// name or its placeholder), or `nil`.
    public func persistentIdentifierForItem(at url: URL) throws(FileProviderError) -> ItemIdentifier? {
        let root = replica.root.standardizedFileURL.path
        var path = url.standardizedFileURL.path
        guard path == root || path.hasPrefix(root + "/") else { return nil }
        path = path == root ? "" : String(path.dropFirst(root.count + 1))
        if let record = try store.item(domainID: domainID, path: path) { return record.identifier }
        let (folder, name) = RelativePath(path).split
        guard let item = replica.itemName(ofPlaceholderFile: name, in: folder) else { return nil }
        return try store.item(domainID: domainID, path: folder.isEmpty ? item : folder + "/" + item)?.identifier
    }

    /// `urlForItem(withPersistentIdentifier:)`: where an item lives in the replica (its real
    /// name; see ``placeholderURL(for:)`` for placeholders), or `nil` for an unknown identifier.
    public func urlForItem(withPersistentIdentifier identifier: ItemIdentifier) throws(FileProviderError) -> URL? {
        try store.item(domainID: domainID, identifier: identifier).map { replica.url($0.path) }
    }

    /// `placeholderURL(for:)`: the placeholder sibling of an item URL (``PlaceholderName``).
    public func placeholderURL(for url: URL) -> URL {
        url.deletingLastPathComponent().appendingPathComponent(PlaceholderName.of(url.lastPathComponent))
    }
}
