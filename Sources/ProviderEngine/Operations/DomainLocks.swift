import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

/// The locks of one domain's work, taken in this order: the domain's sync lock, across
/// processes (``DomainLock``), then the tree lock, in this process. Sync and the population of
/// dataless folders take turns under them: a folder populated while sync down decides what to
/// write into it would miss the new items of the listing. Shared by a ``DomainController``'s
/// operations (a copy shares the tree lock).
struct DomainLocks: Sendable {
    let context: DomainContext
    /// The domain's sync lock and serve lock files (see ``DomainLock``).
    let syncLockPath: String
    let serveLockPath: String
    /// The marker of an unfinished conversion of the domain's replica mode (see
    /// ``ProviderManager/convertDomain(named:to:onAccess:events:)``).
    let conversionMarkerPath: String
    /// Sync and the population of dataless folders take turns in this process.
    let treeLock = AsyncLock()

    var domain: DomainRecord { context.domain }
    var domainID: Int64 { context.domainID }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await context.blocking(body)
    }

    /// Takes this domain's sync lock (``DomainLock/syncPath(home:domain:)``), waiting while
    /// another sync of the domain holds it, in this process or another (`serve` holds it for
    /// each pass). While it waits it sends ``EngineEvent/waitingForSync(process:serving:)`` once.
    ///
    /// The wait (``SyncLockWait``) polls the lock on the executor (10 ms, doubling up to
    /// 100 ms) and ends when the task is cancelled.
    /// With the lock, it checks that the domain's files are where these locks were made for
    /// (``checkModeIsCurrent()``).
    /// - Throws: `cancelled` when the task is cancelled while waiting; `localIOFailure` when the
    ///   lock file cannot be created or locked; `providerDomainTemporarilyUnavailable` when the
    ///   domain's replica mode was converted since these locks were made, or a conversion is
    ///   unfinished.
    func lockForSync(events: EventHandler?) async throws(FileProviderError) -> DomainLock {
        let lock = try await waitForSyncLock(events: events)
        try await blocking { [self] () throws(FileProviderError) in try checkModeIsCurrent() }
        return lock
    }

    /// Checks that the domain is still in the replica mode these locks were made for and no
    /// conversion of it is unfinished: a conversion (``ProviderManager/convertDomain(named:to:onAccess:events:)``,
    /// which holds the sync lock) moves the files to another folder, and a scan of the old one
    /// would take every file for deleted. Blocking.
    /// - Throws: `providerDomainTemporarilyUnavailable` saying what to do; `localIOFailure` when
    ///   the database fails.
    func checkModeIsCurrent() throws(FileProviderError) {
        if let target = ConversionMarker.target(atPath: conversionMarkerPath) {
            throw ConversionMarker.unfinished(domain.name, target)
        }
        if let current = try store.domain(named: domain.name), current.id == domainID, ReplicaLayouts.differ(current, domain) {
            throw FileProviderError(
                .providerDomainTemporarilyUnavailable,
                "domain '\(domain.name)' was converted to \(current.replicaMode.rawValue) after this process opened it (in \(domain.replicaMode.rawValue)); nothing was done: run the command again (restart a program that keeps domains open)"
            )
        }
    }

    private func waitForSyncLock(events: EventHandler?) async throws(FileProviderError) -> DomainLock {
        let wait = SyncLockWait(path: syncLockPath, serveLockPath: serveLockPath, executor: executor)
        return try await wait.lock(cancelledMessage: "stopped waiting for another sync of \(domain.name) to finish") { holder in
            events?(.waitingForSync(process: holder.process, serving: holder.serving))
        }
    }
}
