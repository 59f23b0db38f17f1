import Foundation
import ProviderCore
import ProviderStore

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

    func evictUpdated(_ records: [ItemRecord], policies: PolicyResolver, report: inout SyncReport) async -> [ItemRecord] {
        await evictUpdated(records, policies, &report)
    }

    /// Partly downloaded files of a `dataless` replica whose present ranges are all of an older
    /// content version than the item's and whose policy evicts on a remote update. The
    /// database selects the stale ones (``MetadataStore/stalePartials(domainID:)``): what changed
    /// in the store, not every partly present file of the domain.
    func staleUpdatedPartials(_ policies: PolicyResolver) throws(FileProviderError) -> [ItemRecord] {
        guard replica.layout.keepsPartialContents else { return [] }
        return try store.stalePartials(domainID: domainID).filter { policies.policy(of: $0).evictsOnRemoteUpdate }
    }

    /// Places listings and changes into the replica and the pass.
    var placer: FolderPlacer { FolderPlacer(context: context, populateFolder: populateFolder) }

    func removeLocalCopy(of record: ItemRecord) throws(FileProviderError) -> Bool {
        try context.removeLocalCopy(of: record)
    }

    /// Whether an item's local copy is in the replica. Blocking.
    func localCopyExists(_ record: ItemRecord) -> Bool { placer.localCopyExists(record) }
}

extension SyncDown {
    /// Sync down. With a change feed and an anchor from an earlier sync, applies what changed
    /// since (see ``pullChanges(from:pass:report:events:)``); when the feed no longer knows the
    /// anchor (`syncAnchorExpired`), or without a feed, lists the whole store, several folders
    /// at once, and applies each folder's differences with the database as its listing
    /// arrives. Then settles what went away or moved, and downloads what must be.
    /// - Throws: what the backend throws when the root cannot be listed or the feed fails;
    ///   `localIOFailure` when the database fails.
    ///
    /// `followChanges`: whether a later sync of this process follows the feed from where this
    /// one ends. Without it, a backend whose anchors die with the process
    /// (``BackendCapabilities/anchorsOutliveProcess`` false) is not asked for one: its feed
    /// would start (the local store watches every folder) for an anchor nothing can use.
    /// Returns whether the whole store was listed (`false` after a pass of the change feed:
    /// items a listing skipped earlier were not looked at again).
    @discardableResult
    func pull(
        report: inout SyncReport, events: EventHandler?, populationBudget: Int, followChanges: Bool = true
    )
        async throws(FileProviderError) -> Bool
    {
        let started = Date()
        let (store, domainID, hasChangeFeed) = (self.store, self.domainID, backend.capabilities.hasChangeFeed)
        // What the pull starts from, in one job on the engine's threads.
        let (found, policies, hadItems, storedAnchor) = try await context.blocking {
            [self] () throws(FileProviderError) -> (ItemRecord?, PolicyResolver, Bool, SyncAnchor?) in
            guard let root = try store.item(domainID: domainID, path: "") else { return (nil, PolicyResolver.none, false, nil) }
            let hadItems = try store.itemCount(domainID: domainID) > 1
            let anchor = hasChangeFeed && hadItems ? try store.syncAnchor(domainID: domainID, container: .workingSet) : nil
            return (root, try context.policies(), hadItems, anchor)
        }
        guard let root = found else {
            throw FileProviderError(
                .providerDomainNotFound,
                "domain \(domain.name) has no root record; remove it and add it again")
        }
        var pass = PullPass(policies: policies, budget: populationBudget, hadItems: hadItems)
        var anchorAfterWalk: SyncAnchor?
        if hasChangeFeed {
            if pass.hadItems, let anchor = storedAnchor {
                do {
                    var feedPass = pass
                    feedPass.sweeps = false
                    let newAnchor = try await pullChanges(from: anchor, pass: &feedPass, report: &report, events: events)
                    try await settle(&feedPass, report: &report)
                    await refreshMovedAcrossPins(&feedPass)
                    if newAnchor != anchor {
                        try await context.blocking { () throws(FileProviderError) in
                            try store.setSyncAnchor(newAnchor, domainID: domainID, container: .workingSet)
                        }
                    }
                    feedAnchor.withLock { $0 = newAnchor }
                    report.phases.database = feedPass.databaseSeconds
                    report.phases.replica = Date().timeIntervalSince(started) - feedPass.databaseSeconds
                    try await downloadDue(&feedPass, report: &report, events: events)
                    return false
                } catch where error.code == .syncAnchorExpired {
                    // The feed forgot the anchor (or could not place a change): list everything.
                    // An anchor an earlier process stored is expected to expire with a feed
                    // that lives in the process (the local store's): not worth a notice.
                    if feedAnchor.withLock({ $0 }) == anchor {
                        report.notices.append("\(display("")): \(error.message); listing the whole store")
                    }
                    try await context.blocking { () throws(FileProviderError) in
                        try store.setSyncAnchor(nil, domainID: domainID, container: .workingSet)
                    }
                }
            }
            // "Now", taken before the walk: what changes during it comes with the next feed.
            if followChanges || backend.capabilities.anchorsOutliveProcess {
                anchorAfterWalk = try await backend.currentSyncAnchor(for: .workingSet)
            }
        }
        let walk = StoreWalk(context: context, placer: placer, depth: max(4, downloadDepth))
        let listingSeconds = try await walk.run(from: root, pass: &pass, report: &report, events: events)
        try await pass.flush(to: context, wait: true)
        report.phases.listing = listingSeconds
        try await settle(&pass, report: &report)
        await refreshMovedAcrossPins(&pass)
        report.phases.database = pass.databaseSeconds
        report.phases.replica = Date().timeIntervalSince(started) - listingSeconds - pass.databaseSeconds
        if pass.failedFolders.isEmpty {
            // Every item was listed, and those gone settled: the uploads noted before the walk
            // are confirmed (or were kept as the store did not keep them).
            try await context.blocking { () throws(FileProviderError) in
                try store.confirmUploads(domainID: domainID, notedBefore: started)
            }
        }
        if let anchorAfterWalk, pass.failedFolders.isEmpty {
            try await context.blocking { () throws(FileProviderError) in
                try store.setSyncAnchor(anchorAfterWalk, domainID: domainID, container: .workingSet)
            }
            feedAnchor.withLock { $0 = anchorAfterWalk }
        }
        try await downloadDue(&pass, report: &report, events: events)
        return true
    }

    /// Rewrites the statuses of the items this pass saw the store move into a pinned folder or
    /// out of one (``PullPass/movedAcrossPins``), and of what lies below them: `pinned` or
    /// `downloaded` now (``StatusRefresher``). After the pass has written and settled the new
    /// paths, which the refresh reads; nothing when no move changed an item's pinned-ness.
    private func refreshMovedAcrossPins(_ pass: inout PullPass) async {
        if pass.movedAcrossPins.isEmpty { return }
        let paths = StatusRefresher.tops(of: pass.movedAcrossPins.sorted())
        pass.movedAcrossPins = []
        await StatusRefresher(context: context).refresh(subtreesAt: paths)
    }

    /// Downloads what this pass found outdated or pinned, and what an earlier sync left undone
    /// (it recorded new versions, then was killed or failed to download). Files whose policy
    /// evicts on a remote update (``ContentPolicy/evictOnRemoteUpdate``,
    /// ``ContentPolicy/onlineOnly``) are evicted instead of downloaded again, unless they
    /// hold local changes; placeholders are downloaded only where the policy is
    /// ``ContentPolicy/eager``.
    ///
    /// A page at a time (``DomainContext/subtreePage`` records): this pass's files first, then
    /// the database's (``MetadataStore/dueDownloads(domainID:after:limit:)``), each page checked,
    /// evicted and downloaded before the next is read, so memory is bounded by the page, not by
    /// how much is due in the domain. A file of this pass is not read again from the database.
    private func downloadDue(_ pass: inout PullPass, report: inout SyncReport, events: EventHandler?) async throws(FileProviderError) {
        let (store, domainID) = (self.store, self.domainID)
        let pageSize = max(1, context.subtreePage.withLock { $0 })
        let planned = Set(pass.redownload.map(\.identifier))
        var fromPass = pass.redownload[...]
        pass.redownload = []
        var policies: PolicyResolver?
        var cursor: DueDownloadsCursor?
        var storeDone = false
        var downloadSeconds: Double?
        while !fromPass.isEmpty || !storeDone {
            let taken = Array(fromPass.prefix(pageSize))
            fromPass = fromPass.dropFirst(taken.count)
            // Settling may have moved or adopted some of them: download what the database says
            // now, under the policies as they are now (read once, in the first page's job, with
            // the stale partial downloads; each page in one job on the engine's threads).
            let (readStore, after, known) = (taken.count < pageSize && !storeDone, cursor, policies)
            let page = try await context.blocking {
                [self] () throws(FileProviderError) -> (
                    due: [ItemRecord], evict: [ItemRecord], policies: PolicyResolver, next: DueDownloadsCursor?
                ) in
                let policies: PolicyResolver
                if let known { policies = known } else { policies = try context.policies() }
                var due = taken
                var next = after
                if readStore {
                    let found = try store.dueDownloads(domainID: domainID, after: after, limit: pageSize - taken.count)
                    due += found.records.filter { !planned.contains($0.identifier) }
                    next = found.next
                }
                var current: [ItemRecord] = []
                var evict: [ItemRecord] = []
                for record in due {
                    guard let now = try store.item(domainID: domainID, identifier: record.identifier), now.kind == .file else { continue }
                    let policy = policies.policy(of: now)
                    if now.state == .placeholder {
                        // Pinned (a folder above may have set another policy on a folder below it).
                        if policy == .eager { current.append(now) }
                    } else if now.isOutdated && policy.evictsOnRemoteUpdate {
                        evict.append(now)
                    } else {
                        current.append(now)
                    }
                }
                if known == nil { evict += try staleUpdatedPartials(policies) }
                return (current, evict, policies, next)
            }
            policies = page.policies
            if readStore {
                cursor = page.next
                storeDone = page.next == nil
            }
            var current = page.due
            if !page.evict.isEmpty {
                // A file with local changes is left to today's rules (its download refuses them).
                current += await evictUpdated(page.evict, policies: page.policies, report: &report).filter { $0.state == .materialized }
            }
            if current.isEmpty { continue }
            let downloadsStarted = Date()
            for outcome in await downloader.download(current, events: events) {
                if let notice = outcome.notDownloadedNotice {
                    report.skip(
                        context.relativePath(of: outcome.path), "not downloaded: \(outcome.error?.message ?? "")", notice: notice)
                } else {
                    report.downloaded += 1
                    context.logTransfer(context.relativePath(of: outcome.path), "downloaded")
                    if let notice = outcome.notice { report.notices.append(notice) }
                }
            }
            downloadSeconds = (downloadSeconds ?? 0) + Date().timeIntervalSince(downloadsStarted)
        }
        if let downloadSeconds { report.phases.downloads = downloadSeconds }
    }
}
