import Foundation
import ProviderCore
import ProviderStore

/// One folder of the store, reached by sync down's walk.
struct FolderVisit: Sendable {
    /// The folder as the database has it (or is about to: a folder new in this sync).
    var record: ItemRecord
    /// Whether the folder exists in the replica (its parent is populated, or it is the root).
    var isOnDisk: Bool
    /// Whether this sync found the folder.
    var isNew: Bool
    /// The identifiers of the folders above it, from the root down, as the walk reached it
    /// (empty outside a walk): a folder listed with one of them is listed inside itself.
    var ancestors: [ItemIdentifier] = []
}

/// The state of one sync down while the walk goes on: what to write, what went away, what to
/// download. The walk hands it each folder's listing as it arrives, so memory stays bounded by
/// a few folders' worth of items, not the whole store.
struct PullPass {
    /// The walk waits for the database once this many records are waiting (it goes on
    /// listing and placing while fewer wait).
    static let backlog = 8_192
    /// Records go to the database as soon as this many wait and it is idle.
    static let batchSize = 1_024

    var upserts: [ItemRecord] = []
    /// Time spent waiting for the database (the rest of its work overlaps the walk).
    var databaseSeconds = 0.0
    /// The batch the database is writing.
    var writing: Task<Void, any Error>?
    /// Set by the writing task when it is done.
    var writerDone = Mutex(true)
    var isWriterIdle: Bool { writerDone.withLock { $0 } }
    /// Stored items missing from their folder's listing; settled at the end.
    var gone: [ItemRecord] = []
    /// Items that moved to another folder under the same identifier (not gone).
    var movedIn = Set<ItemIdentifier>()
    /// New files by content version, to recognise a path-derived move (a stored file gone and
    /// a new one with the same contents). `nil` during a domain's first sync.
    var newFilesByVersion: [Data: [ItemIdentifier]]?
    var listedFolders = Set<ItemIdentifier>()
    /// Folders this pass found new (a change feed may bring their items in a later batch).
    var newFolders = Set<ItemIdentifier>()
    var failedFolders: [String] = []
    var redownload: [ItemRecord] = []
    /// The domain's content policies as the pass began.
    var policies: PolicyResolver
    /// Entries this sync may still write into folders it found new.
    var budget: Int
    /// Whether the database held items before this sync (then moves are looked for).
    let hadItems: Bool
    /// A walk of the whole store: what it did not reach went away. A change feed names what
    /// went away itself.
    var sweeps = true

    init(policies: PolicyResolver, budget: Int, hadItems: Bool) {
        self.policies = policies
        self.budget = budget
        self.hadItems = hadItems
        newFilesByVersion = hadItems ? [:] : nil
    }

    /// Whether the item at `path` is kept downloaded (its policy, its own or inherited, is
    /// ``ContentPolicy/eager``).
    func isPinned(_ path: String) -> Bool {
        policies.policy(of: path) == .eager
    }
}

/// Sync down of one domain: lists the store (a walk of every folder, several at once, or the
/// store's change feed from the last anchor), compares each listing with the database as it
/// arrives, writes what changed into the replica (placeholders, moves, removals), queues the
/// records for the database in batches, settles what went away or moved, and downloads what
/// must be (outdated downloaded files, pinned files).
///
/// Made by ``DomainController`` for each sync, while it holds the domain's sync lock and tree
/// lock; what sync down needs of the rest of the domain (populating a dataless folder, evicting
/// files a policy evicts on a remote update) it is given as closures.
struct SyncDown: Sendable {
    let context: DomainContext
    let downloader: Downloader
    /// How many folders are listed at once (at least 4).
    let downloadDepth: Int
    /// The change-feed anchor this domain's controller last stored (see
    /// ``DomainController/feedAnchor``).
    let feedAnchor: Mutex<SyncAnchor?>
    /// Populates a dataless folder and the dataless folders above it (the caller holds the tree lock).
    let populateFolder: @Sendable (String) async throws(FileProviderError) -> Void
    /// Evicts downloaded files whose policy evicts them on a remote update; returns those kept
    /// (local changes).
    let evictUpdated: @Sendable ([ItemRecord], PolicyResolver, inout SyncReport) async -> [ItemRecord]

    var domain: DomainRecord { context.domain }
    var domainID: Int64 { context.domainID }
    var backend: any Backend { context.backend }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func display(_ path: String) -> String { context.display(path) }

    /// The domain's content policies, from the database.
    /// - Throws: `localIOFailure` when the database fails.
    func policies() throws(FileProviderError) -> PolicyResolver {
        PolicyResolver(explicit: try store.explicitPolicies(domainID: domainID))
    }

    func evictUpdated(_ records: [ItemRecord], policies: PolicyResolver, report: inout SyncReport) async -> [ItemRecord] {
        await evictUpdated(records, policies, &report)
    }

    /// Partly downloaded files of a `dataless` replica whose present ranges are all of an older
    /// content version than the item's and whose policy evicts on a remote update.
    func staleUpdatedPartials(_ policies: PolicyResolver) throws(FileProviderError) -> [ItemRecord] {
        guard replica.layout == .dataless else { return [] }
        var stale: [ItemRecord] = []
        for identifier in try store.partiallyPresent(domainID: domainID).keys {
            guard let record = try store.item(domainID: domainID, identifier: identifier), record.kind == .file,
                record.state == .placeholder, policies.policy(of: record.path).evictsOnRemoteUpdate,
                try store.presentRanges(domainID: domainID, identifier: identifier, contentVersion: record.contentVersion).isEmpty
            else { continue }
            stale.append(record)
        }
        return stale
    }

    func writePlaceholders(_ records: [ItemRecord], creating: Bool) async -> [Int: FileProviderError] {
        await context.writePlaceholders(records, creating: creating)
    }

    func moveLocalCopy(of old: ItemRecord, to new: ItemRecord) throws(FileProviderError) {
        try context.moveLocalCopy(of: old, to: new)
    }

    func removeLocalCopy(of record: ItemRecord) throws(FileProviderError) -> Bool {
        try context.removeLocalCopy(of: record)
    }
}

extension SyncDown {
    /// One folder listed during the walk.
    private struct Listing: Sendable {
        var visit: FolderVisit
        var result: Result<ItemListing, FileProviderError>
        /// What the database had of the folder when it was listed.
        var stored: Result<StoredChildren, FileProviderError>
    }

    /// Sync down. With a change feed and an anchor from an earlier sync, applies what changed
    /// since (see ``pullChanges(from:pass:report:events:)``); when the feed no longer knows the
    /// anchor (`syncAnchorExpired`), or without a feed, lists the whole store, several folders
    /// at once, and applies each folder's differences with the database as its listing
    /// arrives. Then settles what went away or moved, and downloads what must be.
    /// - Throws: what the backend throws when the root cannot be listed or the feed fails;
    ///   `localIOFailure` when the database fails.
    func pull(
        report: inout SyncReport, events: EventHandler?, populationBudget: Int
    )
        async throws(FileProviderError)
    {
        let started = Date()
        guard let root = try store.item(domainID: domainID, path: "") else {
            throw FileProviderError(
                .providerDomainNotFound,
                "domain \(domain.name) has no root record; remove it and add it again")
        }
        var pass = PullPass(
            policies: try policies(), budget: populationBudget,
            hadItems: try store.itemCount(domainID: domainID) > 1)
        var anchorAfterWalk: SyncAnchor?
        if backend.capabilities.hasChangeFeed {
            if pass.hadItems, let anchor = try store.syncAnchor(domainID: domainID, container: .workingSet) {
                do {
                    var feedPass = pass
                    feedPass.sweeps = false
                    let newAnchor = try await pullChanges(from: anchor, pass: &feedPass, report: &report, events: events)
                    try await settle(&feedPass, report: &report)
                    if newAnchor != anchor { try store.setSyncAnchor(newAnchor, domainID: domainID, container: .workingSet) }
                    feedAnchor.withLock { $0 = newAnchor }
                    report.phases.database = feedPass.databaseSeconds
                    report.phases.replica = Date().timeIntervalSince(started) - feedPass.databaseSeconds
                    try await downloadDue(&feedPass, report: &report, events: events)
                    return
                } catch where error.code == .syncAnchorExpired {
                    // The feed forgot the anchor (or could not place a change): list everything.
                    // An anchor an earlier process stored is expected to expire with a feed
                    // that lives in the process (the local store's): not worth a notice.
                    if feedAnchor.withLock({ $0 }) == anchor {
                        report.notices.append("\(display("")): \(error.message); listing the whole store")
                    }
                    try store.setSyncAnchor(nil, domainID: domainID, container: .workingSet)
                }
            }
            // "Now", taken before the walk: what changes during it comes with the next feed.
            anchorAfterWalk = try await backend.currentSyncAnchor(for: .workingSet)
        }
        var queue = [FolderVisit(record: root, isOnDisk: true, isNew: false)]
        var foldersListed = 0
        var itemsSeen = 0
        var rootError: FileProviderError?
        let (backend, context, hadItems) = (self.backend, self.context, pass.hadItems)
        let depth = max(4, downloadDepth)
        var failure: FileProviderError?
        var listingSeconds = 0.0
        await withTaskGroup(of: Listing.self) { group in
            var running = 0
            while true {
                while failure == nil, running < depth, let visit = queue.popLast() {
                    running += 1
                    let readsStored = hadItems || !visit.isNew
                    group.addTask {
                        let result: Result<ItemListing, FileProviderError>
                        do {
                            result = .success(try await backend.listAllItems(in: visit.record.identifier))
                        } catch {
                            return Listing(visit: visit, result: .failure(FileProviderError.wrap(error)), stored: .success(.none))
                        }
                        // What the database has of the folder is read here, on the engine's
                        // threads, beside the other listings: the walk's loop only compares.
                        let stored = await StoredChildren.read(
                            of: visit.record.identifier, listed: try? result.get().items, context,
                            children: readsStored, moves: hadItems)
                        return Listing(visit: visit, result: result, stored: stored)
                    }
                }
                let waitStarted = Date()
                guard let listing = await group.next() else { break }
                listingSeconds += Date().timeIntervalSince(waitStarted)
                running -= 1
                if failure != nil { continue }
                foldersListed += 1
                switch listing.result {
                case .failure(let error):
                    let path = listing.visit.record.path
                    if path.isEmpty { rootError = error }
                    pass.failedFolders.append(path)
                    report.notices.append("\(display(path)): not listed: \(error.message)")
                case .success(let items):
                    itemsSeen += items.items.count
                    do throws(FileProviderError) {
                        // Reversed onto the stack: folders are listed in name order, so rows
                        // reach the database mostly in key order (fuller pages, 11% smaller).
                        queue += try await take(
                            listing.visit, listing: items, stored: try listing.stored.get(), pass: &pass, report: &report
                        ).reversed()
                    } catch {
                        failure = error
                    }
                }
                events?(.listing(folders: foldersListed, items: itemsSeen))
            }
        }
        if let rootError { throw rootError }
        if let failure { throw failure }
        report.listedItems = itemsSeen
        try await flush(&pass, wait: true)
        report.phases.listing = listingSeconds
        try await settle(&pass, report: &report)
        report.phases.database = pass.databaseSeconds
        report.phases.replica = Date().timeIntervalSince(started) - listingSeconds - pass.databaseSeconds
        if let anchorAfterWalk, pass.failedFolders.isEmpty {
            try store.setSyncAnchor(anchorAfterWalk, domainID: domainID, container: .workingSet)
            feedAnchor.withLock { $0 = anchorAfterWalk }
        }
        try await downloadDue(&pass, report: &report, events: events)
    }

    /// Downloads what this pass found outdated or pinned, and what an earlier sync left undone
    /// (it recorded new versions, then was killed or failed to download). Files whose policy
    /// evicts on a remote update (``ContentPolicy/evictOnRemoteUpdate``,
    /// ``ContentPolicy/onlineOnly``) are evicted instead of downloaded again, unless they
    /// hold local changes; placeholders are downloaded only where the policy is
    /// ``ContentPolicy/eager``.
    private func downloadDue(_ pass: inout PullPass, report: inout SyncReport, events: EventHandler?) async throws(FileProviderError) {
        // Settling may have moved or adopted some of them: download what the database says now,
        // under the policies as they are now.
        let planned = Set(pass.redownload.map(\.identifier))
        pass.redownload += try store.dueDownloads(domainID: domainID).filter { !planned.contains($0.identifier) }
        let policies = try policies()
        var current: [ItemRecord] = []
        var evict: [ItemRecord] = []
        for record in pass.redownload {
            guard let now = try store.item(domainID: domainID, identifier: record.identifier), now.kind == .file else { continue }
            let policy = policies.policy(of: now.path)
            if now.state == .placeholder {
                // Pinned (a folder above may have set another policy on a folder below it).
                if policy == .eager { current.append(now) }
            } else if now.isOutdated && policy.evictsOnRemoteUpdate {
                evict.append(now)
            } else {
                current.append(now)
            }
        }
        evict += try staleUpdatedPartials(policies)
        if !evict.isEmpty {
            // A file with local changes is left to today's rules (its download refuses them).
            current += await evictUpdated(evict, policies: policies, report: &report).filter { $0.state == .materialized }
        }
        pass.redownload = current
        if !pass.redownload.isEmpty {
            let downloadsStarted = Date()
            defer { report.phases.downloads = Date().timeIntervalSince(downloadsStarted) }
            for outcome in await downloader.download(pass.redownload, events: events) {
                if let notice = outcome.notDownloadedNotice {
                    report.notices.append(notice)
                } else {
                    report.downloaded += 1
                }
            }
        }
    }

    /// Hands the waiting records to the database on the executor, so the walk goes on while
    /// SQLite writes. One batch is in flight at a time; with `wait`, returns once everything
    /// is written (before anything reads what this pass wrote).
    func flush(_ pass: inout PullPass, wait: Bool = false) async throws(FileProviderError) {
        if let writing = pass.writing {
            pass.writing = nil
            let waited = Date()
            defer { pass.databaseSeconds += Date().timeIntervalSince(waited) }
            do {
                try await writing.value
            } catch {
                throw FileProviderError.wrap(error)
            }
        }
        if pass.upserts.isEmpty { return }
        let batch = pass.upserts
        pass.upserts = []
        // Room for a full backlog: growing an array of records copies every record again.
        pass.upserts.reserveCapacity(PullPass.backlog + PullPass.batchSize)
        let (store, domainID, executor) = (self.store, self.domainID, self.executor)
        let done = pass.writerDone
        done.withLock { $0 = false }
        // A domain's first sync writes rows the database does not have: inserted and counted per
        // batch (a row it has after all, the batch is written as any other).
        let isNew = !pass.hadItems
        let writing = Task {
            defer { done.withLock { $0 = true } }
            try await executor.run {
                if isNew {
                    try store.insertNew(domainID: domainID, records: batch)
                } else {
                    try store.apply(domainID: domainID, upserts: batch, deletions: [])
                }
            }
        }
        pass.writing = writing
        if wait { try await flush(&pass) }
    }

    /// Applies one folder's listing: compares it with the folder's stored children, writes what
    /// changed into the replica (when the folder is populated) and queues the records. Returns
    /// the subfolders to list next.
    ///
    /// An entry the store sent with an impossible value, a folder listed inside itself, and an
    /// item deeper or with a longer path than ``WalkBounds`` allows are skipped with a notice; a
    /// stored item of the same identifier is kept as it was (with what is below it).
    private func take(
        _ visit: FolderVisit, listing: ItemListing, stored known: StoredChildren, pass: inout PullPass,
        report: inout SyncReport
    )
        async throws(FileProviderError) -> [FolderVisit]
    {
        let folder = visit.record
        let items = listing.items
        pass.listedFolders.insert(folder.identifier)
        let inRoot = folder.path.isEmpty
        var stored = [ItemIdentifier: ItemRecord](minimumCapacity: known.children.count)
        for child in known.children { stored[child.identifier] = child }
        let ancestors = visit.ancestors + [folder.identifier]
        let rootLength = replica.root.path.utf8.count
        /// Skips an entry: reported, and what the database has of it stays as it is.
        func skip(_ identifier: ItemIdentifier?, _ problem: String) {
            report.notices.append("\(display(folder.path)): skipped an item: \(problem)")
            guard let identifier, let kept = stored.removeValue(forKey: identifier) else { return }
            if kept.kind == .folder { pass.failedFolders.append(kept.path) }
        }
        for refused in listing.refused { skip(refused.identifier, refused.message) }

        // What the listing holds, matched with what the database knows.
        var entries: [(item: Item, path: String, old: ItemRecord?)] = []
        entries.reserveCapacity(items.count)
        var names = Set<String>(minimumCapacity: items.count)
        for var item in items {
            let name = item.filename
            if let problem = DomainController.problem(withRemoteName: name, inRoot: inRoot) {
                report.notices.append("\(display(folder.path)): skipped an item: \(problem)")
                continue
            }
            // String equality is canonical (NFC and NFD spellings are equal) while names are
            // bytes: only a name equal by bytes is a second item.
            if !names.insert(name).inserted, entries.contains(where: { $0.item.filename.utf8.elementsEqual(name.utf8) }) {
                report.notices.append(
                    "\(display(folder.path)): skipped a second item named \(name.debugDescription)")
                continue
            }
            let path = inRoot ? name : folder.path + "/" + name
            if let problem = WalkBounds.problem(listing: item, inside: ancestors)
                ?? WalkBounds.problem(placing: item.kind, at: path, rootLength: rootLength)
            {
                // The folder itself (listed inside itself) is not skipped from its own place.
                skip(ancestors.contains(item.identifier) ? nil : item.identifier, problem)
                continue
            }
            item.parentIdentifier = folder.identifier
            var old = stored.removeValue(forKey: item.identifier)
            if old == nil, let elsewhere = known.elsewhere[item.identifier] {
                // Moved here from another folder under the same identifier.
                old = elsewhere
                pass.movedIn.insert(item.identifier)
            }
            if let known = old, known.kind != item.kind {
                pass.gone.append(known)
                pass.movedIn.remove(item.identifier)
                old = nil
            }
            entries.append((item, path, old))
        }
        pass.gone += stored.values
        return try await place(entries, in: visit, complete: true, pass: &pass, report: &report).map { subfolder in
            var subfolder = subfolder
            subfolder.ancestors = ancestors
            return subfolder
        }
    }

    /// One item of a folder as the store has it now: its new path and, when the database knew
    /// it, its record.
    typealias Entry = (item: Item, path: String, old: ItemRecord?)

    /// Writes a folder's new and changed items into the replica (when the folder is populated)
    /// and queues their records. `complete` says that `entries` is the folder's whole listing
    /// (a walk), so a dataless folder can be populated from it; otherwise (a change feed) a
    /// folder that must be populated is populated from the database first. Returns the
    /// subfolders.
    func place(_ entries: [Entry], in visit: FolderVisit, complete: Bool, pass: inout PullPass, report: inout SyncReport)
        async throws(FileProviderError) -> [FolderVisit]
    {
        var visit = visit
        var folder = visit.record

        // Whether this folder's items are in the replica: it is populated, or becomes so now
        // (a new folder within the budget, a folder in a pinned folder, or a folder that must
        // receive a downloaded file or a populated folder moved into it).
        var populated = !folder.isDataless
        var populatedBefore = populated
        if !populated && !complete {
            let mustHold = entries.contains { entry in
                entry.old.map { $0.state == .materialized || ($0.kind == .folder && !$0.isDataless) } ?? false
            }
            let withinBudget = visit.isNew && visit.isOnDisk && pass.budget >= entries.count
            if mustHold || pass.isPinned(folder.path) {
                try await flush(&pass, wait: true)
                try await populateFolder(folder.path)
                folder = try store.item(domainID: domainID, identifier: folder.identifier) ?? folder
                (populated, populatedBefore) = (true, true)
            } else if withinBudget {
                // A new folder: the feed brings all its items.
                pass.budget -= entries.count
                populated = true
                folder.isDataless = false
                pass.upserts.append(folder)
                populatedBefore = true
            }
        }
        if !populated {
            let mustHold = entries.contains { entry in
                entry.old.map { $0.state == .materialized || ($0.kind == .folder && !$0.isDataless) }
                    ?? false
            }
            let pinned = pass.isPinned(folder.path)
            let withinBudget = visit.isNew && visit.isOnDisk && pass.budget >= entries.count
            if mustHold || pinned || withinBudget {
                if !visit.isOnDisk {
                    try await flush(&pass, wait: true)
                    try await populateFolder(DomainController.split(folder.path).parent)
                    visit.isOnDisk = true
                    folder = try store.item(domainID: domainID, identifier: folder.identifier) ?? folder
                }
                if withinBudget && !mustHold && !pinned { pass.budget -= entries.count }
                populated = true
                folder.isDataless = false
                pass.upserts.append(folder)
            }
        }

        var subfolders: [FolderVisit] = []
        var placeholders: [ItemRecord] = []
        var newFolders: [ItemRecord] = []
        for (item, path, old) in entries {
            guard let old else {
                var record = ItemRecord(domainID: domainID, item: item, path: path)
                if item.kind == .folder {
                    record.isDataless = true
                    pass.newFolders.insert(item.identifier)
                    if populated {
                        newFolders.append(record)
                    } else {
                        pass.upserts.append(record)
                        subfolders.append(FolderVisit(record: record, isOnDisk: false, isNew: true))
                    }
                } else {
                    if populated { placeholders.append(record) } else { pass.upserts.append(record) }
                    if item.kind == .file {
                        if pass.isPinned(path) { pass.redownload.append(record) }
                        if !item.version.content.isEmpty {
                            pass.newFilesByVersion?[item.version.content, default: []].append(item.identifier)
                        }
                    }
                }
                report.added += 1
                continue
            }
            var record = old
            record.update(from: item, path: path)
            let changed =
                old.path != path || old.version != item.version || old.filename != item.filename
                || old.parentIdentifier != folder.identifier
            if changed || !populatedBefore && populated {
                do {
                    try await placeLocalCopy(of: old, as: &record, inPopulatedFolder: populated)
                } catch {
                    report.notices.append("\(display(path)): not updated: \(error.message)")
                    if item.kind == .folder { pass.failedFolders.append(old.path) }
                    continue
                }
                if changed { report.updated += 1 }
                if record.isOutdated { pass.redownload.append(record) }
                pass.upserts.append(record)
            }
            if item.kind == .folder {
                subfolders.append(FolderVisit(record: record, isOnDisk: populated, isNew: false))
            }
        }

        // New folders, then new placeholders, written in parallel.
        if !newFolders.isEmpty {
            let replica = self.replica
            let paths = newFolders.map(\.path)
            let made = try await executor.run { () -> [Result<Int64?, FileProviderError>] in
                paths.map { path in
                    do {
                        try replica.makeFolder(path)
                        return .success(replica.fingerprint(atPath: replica.path(path))?.inode)
                    } catch {
                        return .failure(FileProviderError.wrap(error))
                    }
                }
            }
            for (index, var record) in newFolders.enumerated() {
                switch made[index] {
                case .success(let inode):
                    record.localInode = inode
                    // A change feed names a new folder's items only if it has some: an empty
                    // one is never placed again, so it is populated (empty) now, within the budget.
                    if !complete && pass.budget > 0 {
                        record.isDataless = false
                        pass.budget -= 1
                    }
                    pass.upserts.append(record)
                    subfolders.append(FolderVisit(record: record, isOnDisk: true, isNew: true))
                case .failure(let error):
                    report.added -= 1
                    report.notices.append("\(display(record.path)): \(error.message)")
                }
            }
        }
        if !placeholders.isEmpty {
            let errors = await writePlaceholders(placeholders, creating: true)
            for (index, record) in placeholders.enumerated() {
                if let error = errors[index] {
                    report.added -= 1
                    report.notices.append("\(display(record.path)): \(error.message)")
                } else {
                    pass.upserts.append(record)
                }
            }
        }
        // A batch goes as soon as the database is idle (so little is left to write when the
        // walk ends); the walk waits for it only when the backlog is full.
        if pass.upserts.count >= PullPass.backlog || (pass.upserts.count >= PullPass.batchSize && pass.isWriterIdle) {
            try await flush(&pass)
        }
        return subfolders
    }

    /// Puts an item that changed in the store (renamed, moved, new version) where it now
    /// belongs in the replica, from wherever its local copy is: moved along when it is on disk
    /// and its folder is populated, written fresh when only the new place is populated, removed
    /// when only the old one was. Blocking parts run on the executor.
    private func placeLocalCopy(
        of old: ItemRecord, as record: inout ItemRecord, inPopulatedFolder populated: Bool
    )
        async throws(FileProviderError)
    {
        let replica = self.replica
        let name = domain.name
        let oldCopy = try await executor.run { [self] in localCopyExists(old) }
        switch (oldCopy, populated) {
        case (true, true):
            if old.path != record.path {
                try await executor.run { [self, record] in try moveLocalCopy(of: old, to: record) }
            } else if record.state == .placeholder || record.state == .symlink {
                let metadata = PlaceholderMetadata(domain: name, record: record)
                try await executor.run { [record] in try replica.writePlaceholder(record.path, metadata) }
            }
        case (false, true):
            switch record.kind {
            case .folder:
                // Its items were not in the replica: it comes back dataless.
                let path = record.path
                let inode = try await executor.run { () throws -> Int64? in
                    try replica.makeFolder(path)
                    return replica.fingerprint(atPath: replica.path(path))?.inode
                }
                record.localInode = inode
                record.isDataless = true
            case .file, .symlink:
                if record.state == .materialized { record.markPlaceholder() }
                let metadata = PlaceholderMetadata(domain: name, record: record)
                try await executor.run { [record] in try replica.writePlaceholder(record.path, metadata) }
            }
        case (true, false):
            // Only placeholders and empty dataless folders get here (see `take`).
            _ = try await executor.run { [self] in try removeLocalCopy(of: old) }
            if record.kind == .folder { record.isDataless = true }
        case (false, false):
            if record.kind == .folder { record.isDataless = true }
        }
    }

    /// Whether an item's local copy (its file, placeholder or folder) is in the replica.
    /// Blocking.
    func localCopyExists(_ record: ItemRecord) -> Bool {
        switch record.state {
        case .placeholder, .symlink:
            return replica.placeholderExists(record.path)
        case .materialized:
            return replica.fingerprint(atPath: replica.path(record.path))?.isRegularFile == true
                && !(replica.layout == .dataless && replica.placeholderExists(record.path))
        case .folder: return replica.fingerprint(atPath: replica.path(record.path))?.isDirectory == true
        }
    }
}
