import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem
import Thumbnails

/// Runs one domain: sync, materialize, evict, pin. Safe to use from many tasks at once;
/// requests to materialize the same item share one download.
///
/// A facade, as Apple's `NSFileProviderManager` is: it routes each request to a part with one
/// job over one ``DomainContext``, made when the request comes: ``Materializer``,
/// ``ManualEviction``, ``Populator``, ``PolicySetter``, ``ThumbnailMaker``, ``DomainSync``
/// (with sync down's ``SyncDown``, and sync up's ``SyncUp``, made on the first sync). What
/// outlives a request stays here: the ``Downloader`` (shared downloads), the locks
/// (``DomainLocks``), the change-feed anchor.
public final class DomainController: Sendable {
    /// What the domain's parts share: the domain, its store, its replica, the database, the executor.
    let context: DomainContext
    public var domain: DomainRecord { context.domain }
    public var domainID: Int64 { context.domainID }
    /// The domain's store, wrapped in ``CheckedBackend``.
    public var backend: any Backend { context.backend }
    public var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    /// Reads the records commands act on: at the paths they name, and subtrees a page at a time.
    let reader: RecordReader
    /// Downloads files into the replica: materialize, sync's due downloads, conflicts.
    let downloader: Downloader
    /// Records when files were used (a `materialize` counts), for least-recently-used eviction.
    public let useRecorder: UseRecorder
    /// The sync lock across processes and the tree lock in this one.
    let locks: DomainLocks
    /// Names never uploaded from this domain's replica.
    public let ignoreRules: IgnoreRules
    /// How many download batches run at once: 8, or the backend's concurrent transfers when
    /// more (``BackendCapabilities/concurrentTransfers``).
    public let downloadDepth: Int
    /// How long the domain waits after failures that back it off.
    public let backoffPolicy: BackoffPolicy
    /// The change-feed anchor this controller last stored: an expired anchor it did not get
    /// from its own backend (an earlier process's) is expected, and not reported.
    let feedAnchor = Mutex<SyncAnchor?>(nil)
    /// Sync up, made on first use (a controller that only materializes never makes it).
    let madeSyncUp = Mutex<SyncUp?>(nil)
    /// Records a recursive operation reads from the database at once (tests make it small).
    var subtreePage: Mutex<Int> { context.subtreePage }
    /// New files and edits sent at once, unless ``BackendCapabilities/concurrentTransfers`` is more.
    public static let uploadDepth = SyncUp.uploadDepth
    /// How many entries a sync writes at most into folders it found new; further new folders stay
    /// dataless (populated when opened). Folders the replica shows always get their new items.
    public static let defaultPopulationBudget = 250

    init(domain: DomainRecord, backend: any Backend, manager: ProviderManager, downloadDepth: Int = 8) throws(FileProviderError) {
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(domain.name) has no id") }
        // Every item from the store passes ItemBounds before the engine uses it.
        let backend = CheckedBackend(backend)
        useRecorder = manager.useRecorder
        self.downloadDepth = TransferDepths.depth(downloadDepth, for: backend.capabilities)
        backoffPolicy = manager.backoffPolicy
        ignoreRules = IgnoreRules(extra: domain.ignoreList)
        context = DomainContext(
            domain: domain, domainID: id, backend: backend, replica: try manager.openReplica(of: domain, id: id),
            store: manager.store, executor: manager.executor, newDatalessFolders: manager.newDatalessFolders,
            logger: manager.logger)
        locks = DomainLocks(
            context: context, syncLockPath: DomainLock.syncPath(home: manager.home, domain: domain.name),
            serveLockPath: DomainLock.path(home: manager.home, domain: domain.name),
            conversionMarkerPath: manager.conversionMarkerPath(forDomainNamed: domain.name))
        reader = RecordReader(context: context)
        downloader = Downloader(context: context, depth: downloadDepth, space: manager.spaceReservations)
    }

    /// Sync up: the local scan, the journal, conflicts and uploads; made on the first call.
    var syncUp: SyncUp {
        madeSyncUp.withLock { made in
            if let made { return made }
            let syncUp = SyncUp(context: context, downloader: downloader, ignoreRules: ignoreRules)
            made = syncUp
            return syncUp
        }
    }
    /// Files a watcher saw finished being written: uploaded without waiting for the settle time.
    public var finishedWrites: FinishedWrites { syncUp.finishedWrites }
    var materializer: Materializer {
        Materializer(context: context, locks: locks, reader: reader, downloader: downloader, useRecorder: useRecorder)
    }
    var populator: Populator { Populator(context: context, locks: locks, reader: reader) }
    var eviction: ManualEviction { ManualEviction(context: context, reader: reader) }
    var policySetter: PolicySetter { PolicySetter(materializer: materializer, eviction: eviction) }
    /// Sync down, for one sync: the walk or the change feed, the replica's placeholders and
    /// moves, the records, the due downloads.
    var syncDown: SyncDown {
        let (populator, policySetter) = (self.populator, self.policySetter)
        return SyncDown(
            context: context, downloader: downloader, downloadDepth: downloadDepth, feedAnchor: feedAnchor,
            populateFolder: { (path) async throws(FileProviderError) in try await populator.populateFolder(path, ancestors: true) },
            evictUpdated: { records, policies, report in await policySetter.evictUpdated(records, policies: policies, report: &report) })
    }

    func close() async { await backend.close() }

    /// Brings the replica and the database up to date with the store (the details: `DomainSync`):
    /// new items become placeholders or folders (new folders while `populationBudget` lasts; none
    /// in a layout that lists dataless folders from the database), changed ones are rewritten or
    /// downloaded again (or evicted, per their content policy), moves are moved, deletions removed
    /// (a file with local changes is kept), pinned items are materialized. One bad item never
    /// stops the rest; a failure of the whole domain backs it off (``BackoffPolicy``). One sync of
    /// a domain runs at a time across processes (its ``DomainLock``; waiting says
    /// ``EngineEvent/waitingForSync(process:serving:)``).
    ///
    /// `changes`: the folders a watcher saw change (``ChangedFolders``, kept by `serve`): sync up
    /// compares only those and gives back what it did not finish; without it, every folder.
    /// `followChanges`: whether later syncs follow the store's change feed from where this one
    /// ends; a one-shot sync passes `false`, so a store whose feed lives in this process
    /// (``BackendCapabilities/anchorsOutliveProcess`` false) does not start it.
    /// - Throws: `providerDomainTemporarilyUnavailable` (nothing done) for a disconnected domain;
    ///   what the backend throws when the root cannot be listed or an upload backs the domain off
    ///   (`serverUnreachable`, …); `localIOFailure` when the database fails; `cancelled` when the
    ///   task is cancelled (no operation starts after that, what was done is recorded, the message
    ///   says what was and was not done; not recorded as a failure).
    @discardableResult
    public func sync(
        events: EventHandler? = nil, upload: Bool = true, settleSeconds: Double = 0,
        populationBudget: Int = DomainController.defaultPopulationBudget, changes: ChangedFolders? = nil,
        followChanges: Bool = true
    ) async throws(FileProviderError) -> SyncReport {
        let run = DomainSync(
            context: context, locks: locks, syncUp: upload ? syncUp : nil, syncDown: syncDown, populator: populator,
            backoffPolicy: backoffPolicy)
        // A layout that lists dataless folders from the database gets none written (but pinned ones).
        let populationBudget = ReplicaLayouts.layout(of: context.domain).listsDatalessFoldersFromDatabase ? 0 : populationBudget
        return try await PoolCheck.during("sync") { () async throws(FileProviderError) -> SyncReport in
            try await run.sync(
                events: events, upload: upload, settleSeconds: settleSeconds, populationBudget: populationBudget, changes: changes,
                followChanges: followChanges)
        }
    }

    /// The domain's current backoff from the database (maybe another process's), or `nil`.
    /// - Throws: `localIOFailure` when the database fails.
    public func backoff() throws(FileProviderError) -> DomainBackoff? {
        try store.domain(id: domainID).flatMap(DomainBackoff.init)
    }

    /// Downloads files (`startProvidingItem`): each into a staging file, checked for size, dated,
    /// renamed into place; the placeholder is removed and the new state recorded. Folders stand
    /// for the files directly in them, or below them with `recursive`. A cancelled task starts
    /// no new download; every file not downloaded gets a `cancelled` outcome.
    /// Never throws: each item's outcome says whether it worked; every item gets
    /// `providerDomainTemporarilyUnavailable` while the domain is disconnected (`domain
    /// disconnect`: nothing is fetched from its store until it is connected again).
    public func materialize(paths: [String], recursive: Bool, events: EventHandler? = nil) async -> [ItemOutcome] {
        await materializer.materialize(paths: paths, recursive: recursive, events: events)
    }

    /// ``materialize(paths:recursive:events:)`` giving the outcomes to `report` a page of a subtree
    /// at a time: `materialize -R` of a million files holds no million outcomes.
    public func materialize(paths: [String], recursive: Bool, events: EventHandler? = nil, outcomes report: OutcomeHandler) async {
        await materializer.materialize(paths: paths, recursive: recursive, events: events, outcomes: report)
    }

    /// Drops downloaded contents (`stopProvidingItem`): each materialized file is swapped for its
    /// placeholder atomically; a partly present file of a dataless replica loses its fetched
    /// ranges (punched out while no program has it open, else refused with `nonEvictable`).
    /// Folders stand for the files below them.
    ///
    /// Refuses, per item, with `nonEvictable` for items whose content policy is
    /// ``ContentPolicy/eager`` (pinned, itself or through a folder: the message names where the
    /// policy is set and how to change it) and `unsyncedEdits` for files changed locally;
    /// never throws. When the task is cancelled, the files evicted so far are recorded and
    /// every other one gets a `cancelled` outcome.
    public func evict(paths: [String], recursive: Bool) async -> [ItemOutcome] {
        await eviction.evict(paths: paths, recursive: recursive)
    }

    /// ``evict(paths:recursive:)`` giving the outcomes to `report` a page of a subtree at a time:
    /// `evict -R` of a million files holds no million outcomes.
    public func evict(paths: [String], recursive: Bool, outcomes report: OutcomeHandler) async {
        await eviction.evict(paths: paths, recursive: recursive, outcomes: report)
    }

    /// Populates dataless folders, as Apple's system enumerates a dataless folder the first time
    /// it is opened: each folder's items are written into the replica (placeholders for files
    /// and symlinks, dataless folders for folders) from the database, without asking the store.
    /// A path inside a dataless folder populates the folders above it; `recursive` populates
    /// every folder below too. Takes the domain's sync lock (waits for a sync in another
    /// process); a local file in the way is renamed, and a cancelled task finishes the folder
    /// under way and gives the paths not done a `cancelled` outcome.
    /// Never throws: each path's outcome says whether it worked.
    public func populate(paths: [String], recursive: Bool) async -> [ItemOutcome] {
        await populator.populate(paths: paths, recursive: recursive)
    }

    /// The domain's content policies as they are now (see ``PolicyResolver``: the folders'; a
    /// file's own is in its record).
    /// - Throws: `localIOFailure` when the database fails.
    public func policies() throws(FileProviderError) -> PolicyResolver {
        try context.policies()
    }

    /// The content policy that applies to the item at `path`, and where it is set.
    /// - Throws: `noSuchItem` when the domain has no item there; `localIOFailure` when the
    ///   database fails.
    public func effectivePolicy(at path: String) throws(FileProviderError) -> EffectivePolicy {
        let record = try record(at: path)
        return try context.policies(along: path).effective(record)
    }

    /// Sets the content policy of items (Apple's `NSFileProviderContentPolicy`, cfapi's pin
    /// states); `nil` removes an item's own policy, so it inherits its folder's. A policy set
    /// on a folder applies to everything below it: the policies set on items below are
    /// removed. Then acts on the policy each item has now: downloads what is eager, evicts
    /// what is online-only (refusing open files and local changes, evicted later).
    ///
    /// Never throws: the changes made, and an outcome per item that failed or was downloaded or
    /// evicted (`noSuchItem` for an unknown path, what ``materialize(paths:recursive:events:)``
    /// and ``evict(paths:recursive:)`` give per file).
    public func setPolicy(_ policy: ContentPolicy?, paths: [String], events: EventHandler? = nil) async -> (
        changes: [PolicyChange], outcomes: [ItemOutcome]
    ) {
        await policySetter.setPolicy(policy, paths: paths, events: events)
    }

    /// Pins items: sets their content policy to ``ContentPolicy/eager`` (Apple's "keep
    /// downloaded", cfapi's pinned) and downloads the files, for a folder every file below it,
    /// now and after later syncs. The same as ``setPolicy(_:paths:events:)`` with `.eager`.
    /// Never throws: an outcome per item that failed or was downloaded.
    public func pin(paths: [String], events: EventHandler? = nil) async -> [ItemOutcome] {
        await setPolicy(.eager, paths: paths, events: events).outcomes
    }

    /// Unpins items as cfapi's unpinned: sets their content policy to
    /// ``ContentPolicy/onlineOnly`` and evicts their downloaded files now (a folder's, all
    /// below it). The same as ``setPolicy(_:paths:events:)`` with `.onlineOnly`. Never throws:
    /// the changes made, and an outcome per file evicted or refused (open in a program:
    /// `nonEvictable`; local changes not uploaded: `unsyncedEdits`).
    public func unpin(paths: [String]) async -> (changes: [PolicyChange], outcomes: [ItemOutcome]) {
        await setPolicy(.onlineOnly, paths: paths)
    }

    /// Counts of the domain's items by state.
    public func summary() throws(FileProviderError) -> ItemSummary { try store.summary(domainID: domainID) }

    /// Returns a `size`×`size` JPEG thumbnail of the file at `path` (the centre square of the
    /// image), cached in the metadata database by content version: made by a backend that makes
    /// them, else from the replica's copy (materialized first).
    /// - Throws: `noSuchItem` when no item is at `path` (or the store lost it);
    ///   `notSupported` for a folder, a symlink or a file that is not a JPEG, PNG, GIF or WebP
    ///   image; `invalidArgument` for a `size` outside 1...4096; what materializing throws
    ///   (`serverUnreachable`, `unsyncedEdits`, …).
    public func thumbnail(at path: String, size: Int = Thumbnailer.defaultSize) async throws(FileProviderError) -> Data {
        try await ThumbnailMaker(materializer: materializer).thumbnail(at: path, size: size)
    }

    /// Writes the freedesktop.org thumbnails of `sizes` of the file at `path` into
    /// `cacheHome/thumbnails/` (``ThumbnailMaker``), never downloading the file; returns their paths.
    /// - Throws: `notSupported` when the file is not downloaded and its store makes no
    ///   thumbnails, or is no file; what the backend throws; `localIOFailure`.
    public func freedesktopThumbnails(at path: String, sizes: [FreedesktopThumbnail.Size], cacheHome: URL) async throws(FileProviderError)
        -> [String]
    {
        try await ThumbnailMaker(materializer: materializer).freedesktopThumbnails(at: path, sizes: sizes, cacheHome: cacheHome)
    }

    /// The stored item at a path.
    /// - Throws: `noSuchItem` saying how to refresh; `localIOFailure` when the database fails.
    public func record(at path: String) throws(FileProviderError) -> ItemRecord {
        try reader.record(at: path)
    }

    /// The items directly inside a folder, or the item itself when it is not a folder; with
    /// `recursive`, every item below it in path order, in one array (tests, small trees; the
    /// engine reads a subtree in pages: ``RecordReader/forEachSubtreePage(below:deepestFirst:_:)``).
    public func list(at path: String, recursive: Bool) throws(FileProviderError) -> [ItemRecord] {
        try reader.list(at: path, recursive: recursive)
    }

    /// Whether an item or one of its ancestor folders (the root too) is pinned.
    public func isEffectivelyPinned(_ record: ItemRecord) throws(FileProviderError) -> Bool {
        try context.policies(along: record.path).pinHolder(of: record) != nil
    }

    /// `persistentIdentifierForItem(at:)`: the identifier of the item at a replica URL (its real
    /// name or its placeholder), or `nil`.
    public func persistentIdentifierForItem(at url: URL) throws(FileProviderError) -> ItemIdentifier? {
        try reader.identifier(ofItemAt: url)
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
