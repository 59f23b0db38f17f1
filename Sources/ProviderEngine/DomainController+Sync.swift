import Foundation
import ProviderCore
import ProviderStore

/// Where a sync's time went, in seconds.
public struct SyncPhases: Codable, Sendable {
    public var listing = 0.0
    public var replica = 0.0
    public var database = 0.0
    public var downloads = 0.0
    public var upload = 0.0
    public init() {}
}

/// What a sync did.
public struct SyncReport: Codable, Sendable {
    public var domain: String
    public var listedItems = 0
    /// Folders listed exactly as the last time their rows were made to match a listing, so
    /// neither read nor compared again (``ListingDigest``).
    public var unchangedFolders = 0
    public var added = 0
    public var updated = 0
    public var moved = 0
    public var deleted = 0
    public var downloaded = 0
    /// Downloaded files evicted instead of downloaded again after their contents changed in
    /// the store, by their content policy (`evict-on-remote-update`, `online-only`).
    public var evictedOnUpdate = 0
    /// Local creations, edits, moves and deletions sent to the store.
    public var uploaded = 0
    /// Conflicts resolved by keeping both versions (see `fileproviderctl conflicts`).
    public var conflicts = 0
    /// Local files still being written, left for the next sync.
    public var pendingLocal: [String] = []
    /// Local changes found but not sent because the sync was interrupted.
    public var unsent = 0
    /// Items left as they were, with why (an unsafe name, local changes kept, an error).
    public var notices: [String] = []
    /// Items of the store this sync skipped (``SyncProblem/Kind/skipped``).
    public var skipped = 0
    /// Local changes this sync did not send (``SyncProblem/Kind/notSent``).
    public var notSent = 0
    /// The first ``problemLimit`` problems, with their paths and reasons.
    public var problems: [SyncProblem] = []
    /// The store stopped answering while the sync listed it (a folder below the root failed
    /// with an error that backs the domain off: unreachable, not authenticated, out of quota):
    /// what was listed is synced, the rest kept as it was, and the domain backs off as after a
    /// failed sync. `nil` when every folder answered.
    public var unreachable: String?
    public var seconds = 0.0
    /// Time spent listing the store, changing the replica, and writing the database.
    public var phases = SyncPhases()

    public init(domain: String) { self.domain = domain }
}

extension DomainController {
    /// How many entries a sync writes at most into folders it found new, before it leaves
    /// further new folders dataless (populated when first opened or materialized). Folders the
    /// replica already shows always get their new items.
    public static let defaultPopulationBudget = 250

    /// Brings the replica and the database up to date with the store: new items become
    /// placeholders or folders, changed placeholders are rewritten, materialized files whose
    /// contents changed are downloaded again (or evicted, where their content policy says so),
    /// moved items are moved, deleted items are removed (a materialized file with local changes
    /// is kept), items whose policy is `eager` (pinned) are materialized.
    ///
    /// The database learns every item of the store; the replica shows the items of populated
    /// folders. New folders are populated while the sync's population budget lasts
    /// (``defaultPopulationBudget`` entries) and stay dataless after that, as Apple's system
    /// leaves folders dataless until they are opened.
    ///
    /// One bad item never stops the rest: it is reported in the notices.
    ///
    /// A failure of the whole domain is recorded on it (`lastError`); when the failure's code
    /// backs the domain off (`serverUnreachable`, `notAuthenticated`, `insufficientQuota`), the
    /// domain's `failureCount` grows and `nextRetryAt` is set (see ``BackoffPolicy``). A success
    /// clears both. `sync` itself does not wait for `nextRetryAt`: `serve` does.
    ///
    /// One sync of a domain runs at a time, across processes: a sync first takes the domain's
    /// sync lock (``DomainLock``) and waits while another holds it (``EngineEvent/waitingForSync(process:serving:)``).
    /// - Throws: `providerDomainTemporarilyUnavailable` (nothing done, nothing recorded) for a
    ///   disconnected domain; what the backend throws when the root cannot be listed or an upload fails in a
    ///   way that backs the domain off (for example `serverUnreachable`), `localIOFailure`
    ///   when the database fails, and `cancelled` when the task is cancelled: no operation
    ///   starts after that, running ones end, what was done is recorded, and the error's message
    ///   says what was done and what was not (``interruptionSummary(_:)``). A cancelled sync is
    ///   not recorded as a failure of the domain.
    ///
    /// `changes`: the folders a watcher saw change (``ChangedFolders``, kept by `serve`); sync
    /// up compares only those, and gives back what it did not finish. Without it, every folder.
    ///
    /// `followChanges`: whether later syncs of this controller follow the store's change feed
    /// from where this one ends (`serve`, a program that syncs again). A one-shot sync (the
    /// CLI's `sync`) passes `false`: a store whose feed lives in this process
    /// (``BackendCapabilities/anchorsOutliveProcess`` false, the local store) then does not
    /// start it.
    @discardableResult
    public func sync(
        events: EventHandler? = nil, upload: Bool = true, settleSeconds: Double = 0,
        populationBudget: Int = DomainController.defaultPopulationBudget, changes: ChangedFolders? = nil,
        followChanges: Bool = true
    ) async throws(FileProviderError) -> SyncReport {
        try await PoolCheck.during("sync") { () async throws(FileProviderError) -> SyncReport in
            try await syncing(
                events: events, upload: upload, settleSeconds: settleSeconds, populationBudget: populationBudget, changes: changes,
                followChanges: followChanges)
        }
    }

    private func syncing(
        events: EventHandler?, upload: Bool, settleSeconds: Double, populationBudget: Int, changes: ChangedFolders?,
        followChanges: Bool
    ) async throws(FileProviderError) -> SyncReport {
        try await blocking { [self] () throws(FileProviderError) in try checkConnected() }
        // Across processes (and tasks of this one) first, then the tree; populating takes them
        // in the same order.
        let lock = try await lockForSync(events: events)
        defer { withExtendedLifetime(lock) {} }
        return try await treeLock.withLock { () async throws(FileProviderError) -> SyncReport in
            let started = Date()
            var report = SyncReport(domain: domain.name)
            var pulling = false
            do throws(FileProviderError) {
                try await checkReplicaRoot()
                if upload {
                    try await syncUp.push(report: &report, settleSeconds: settleSeconds, changes: changes) {
                        (path) async throws(FileProviderError) in try await populateFolder(path, ancestors: true)
                    }
                }
                pulling = true
                try await syncDown.pull(
                    report: &report, events: events, populationBudget: populationBudget, followChanges: followChanges)
                // Sync down notes what a cancellation stopped and goes on to the end.
                if Task.isCancelled { throw FileProviderError.notStarted }
            } catch where error.code == .cancelled && Task.isCancelled {
                throw FileProviderError(.cancelled, Self.interruptionSummary(report, whilePulling: pulling))
            } catch {
                await recordSyncOutcome(error)
                throw error
            }
            await recordSyncOutcome(report.unreachable.map { FileProviderError(.serverUnreachable, $0) })
            await recordProblems(of: report)
            report.seconds = Date().timeIntervalSince(started)
            return report
        }
    }

    /// Records what a finished sync left undone (its counts and first problems), replacing what
    /// the last one left, for `status`. A database that cannot be written loses only this.
    func recordProblems(of report: SyncReport) async {
        let (store, domainID) = (self.store, self.domainID)
        let outcome = SyncOutcomeRecord(domainID: domainID, skipped: report.skipped, notSent: report.notSent)
        let problems = report.problems.map {
            SyncProblemRecord(domainID: domainID, kind: $0.kind.rawValue, path: $0.path, reason: $0.reason)
        }
        _ = try? await blocking { () throws(FileProviderError) in try store.recordSyncOutcome(outcome, problems: problems) }
    }

    /// Checks that the domain is connected now (another process may have disconnected it since
    /// this controller was made).
    /// - Throws: `providerDomainTemporarilyUnavailable` after `domain disconnect`; `localIOFailure`
    ///   when the database fails.
    func checkConnected() throws(FileProviderError) {
        guard let record = try store.domain(named: domain.name), !record.isConnected else { return }
        throw FileProviderError(
            .providerDomainTemporarilyUnavailable,
            "domain '\(domain.name)' is disconnected: it syncs nothing until 'fileproviderctl domain connect \(domain.name)'")
    }

    /// What an interrupted sync did and did not do, in words: `3 local changes sent, 5 not
    /// sent; remote changes not brought down`.
    static func interruptionSummary(_ report: SyncReport, whilePulling: Bool) -> String {
        var text = "\(report.uploaded) local change\(report.uploaded == 1 ? "" : "s") sent"
        if report.unsent > 0 { text += ", \(report.unsent) not sent" }
        if whilePulling {
            text +=
                "; interrupted while bringing remote changes down (\(report.downloaded) file\(report.downloaded == 1 ? "" : "s") downloaded)"
        } else {
            text += "; remote changes not brought down"
        }
        return text
    }

    /// Checks that the replica folder is there and is this domain's (``Replica/checkRoot(domain:knowsItems:)``):
    /// a sync of a replica that is gone would send the deletion of everything.
    /// - Throws: `providerDomainTemporarilyUnavailable` when it is not; `localIOFailure` when
    ///   the database fails.
    func checkReplicaRoot() async throws(FileProviderError) {
        let (replica, name, store, domainID) = (self.replica, domain.name, self.store, self.domainID)
        let knowsItems = try await blocking { () throws(FileProviderError) in try store.itemCount(domainID: domainID) > 1 }
        try await executor.run { try replica.checkRoot(domain: name, knowsItems: knowsItems) }
    }
}
