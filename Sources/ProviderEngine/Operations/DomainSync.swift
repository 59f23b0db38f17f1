import Foundation
import ProviderCore
import ProviderStore

/// One sync of a domain (`sync`, a pass of `serve`): under the domain's locks
/// (``DomainLocks``), sync up (``SyncUp``) then sync down (``SyncDown``), and its outcome
/// recorded on the domain (the backoff, the problems for `status`). Built per sync by
/// ``DomainController``.
///
/// The database learns every item of the store; the replica shows the items of populated
/// folders. New folders are populated while the sync's population budget lasts
/// (``DomainController/defaultPopulationBudget`` entries) and stay dataless after that, as
/// Apple's system leaves folders dataless until they are opened.
///
/// One bad item never stops the rest: it is reported in the notices.
///
/// A failure of the whole domain is recorded on it (`lastError`); when the failure's code
/// backs the domain off (`serverUnreachable`, `notAuthenticated`, `insufficientQuota`), the
/// domain's `failureCount` grows and `nextRetryAt` is set (see ``BackoffPolicy``). A success
/// clears both. `sync` itself does not wait for `nextRetryAt`: `serve` does.
struct DomainSync: Sendable {
    let context: DomainContext
    let locks: DomainLocks
    /// Sync up; `nil` for a sync that does not upload (``DomainController`` then does not make it).
    let syncUp: SyncUp?
    let syncDown: SyncDown
    let populator: Populator
    /// How long the domain waits after failures that back it off.
    let backoffPolicy: BackoffPolicy

    var domain: DomainRecord { context.domain }
    var domainID: Int64 { context.domainID }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await context.blocking(body)
    }

    /// ``DomainController/sync(events:upload:settleSeconds:populationBudget:changes:followChanges:)``.
    func sync(
        events: EventHandler?, upload: Bool, settleSeconds: Double, populationBudget: Int, changes: ChangedFolders?,
        followChanges: Bool
    ) async throws(FileProviderError) -> SyncReport {
        try await blocking { [context] () throws(FileProviderError) in try context.checkConnected() }
        // Across processes (and tasks of this one) first, then the tree; populating takes them
        // in the same order.
        let lock = try await locks.lockForSync(events: events)
        defer { withExtendedLifetime(lock) {} }
        return try await locks.treeLock.withLock { () async throws(FileProviderError) -> SyncReport in
            let started = Date()
            var report = SyncReport(domain: domain.name)
            var pulling = false
            var walkedStore = true
            do throws(FileProviderError) {
                try await checkReplicaRoot()
                if upload, let syncUp {
                    try await syncUp.push(report: &report, settleSeconds: settleSeconds, changes: changes) {
                        (path) async throws(FileProviderError) in try await populator.populateFolder(path, ancestors: true)
                    }
                }
                pulling = true
                walkedStore = try await syncDown.pull(
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
            await recordProblems(of: report, walkedStore: walkedStore)
            report.seconds = Date().timeIntervalSince(started)
            return report
        }
    }

    /// Records what a finished sync left undone (its counts and first problems), replacing what
    /// the last one left, for `status`. A sync that did not list the whole store (a pass of the
    /// change feed, `walkedStore` false) looked at no item an earlier listing skipped: those
    /// skipped items are kept, with what this sync skipped besides. A database that cannot be
    /// written loses only this.
    func recordProblems(of report: SyncReport, walkedStore: Bool = true) async {
        let (store, domainID) = (self.store, self.domainID)
        let fresh = report.problems.map {
            SyncProblemRecord(domainID: domainID, kind: $0.kind.rawValue, path: $0.path, reason: $0.reason)
        }
        let (skipped, notSent) = (report.skipped, report.notSent)
        _ = try? await blocking { () throws(FileProviderError) in
            var outcome = SyncOutcomeRecord(domainID: domainID, skipped: skipped, notSent: notSent)
            var problems = fresh
            if !walkedStore, let last = try store.lastSyncOutcome(domainID: domainID, limit: SyncReport.problemLimit),
                last.outcome.skipped > 0
            {
                let kept = last.problems.filter { $0.kind == SyncProblem.Kind.skipped.rawValue }
                let paths = Set(fresh.map(\.path))
                let again = kept.filter { paths.contains($0.path) }.count
                outcome.skipped = last.outcome.skipped + skipped - again
                problems = Array((kept.filter { !paths.contains($0.path) } + fresh).prefix(SyncReport.problemLimit))
            }
            try store.recordSyncOutcome(outcome, problems: problems)
        }
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

    /// Records the outcome of a sync of the whole domain: a success clears the backoff and the
    /// last error; a failure sets the last error and, when its code's reaction is
    /// `backOffDomain`, counts the failure and sets the next retry time with ``backoffPolicy``.
    /// Database errors are ignored: the sync's own outcome matters more.
    func recordSyncOutcome(_ error: FileProviderError?) async {
        let (domainID, store, policy) = (self.domainID, self.store, backoffPolicy)
        _ = try? await blocking { ProviderManager.recordOutcome(error, domainID: domainID, store: store, policy: policy) }
    }
}
