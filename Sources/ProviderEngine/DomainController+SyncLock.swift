import Foundation
import ProviderCore

extension DomainController {
    /// Takes this domain's sync lock (``DomainLock/syncPath(home:domain:)``), waiting while
    /// another sync of the domain holds it, in this process or another (`serve` holds it for
    /// each pass). While it waits it sends ``EngineEvent/waitingForSync(process:serving:)`` once.
    ///
    /// The wait polls the lock (10 ms, doubling up to 100 ms) and ends when the task is cancelled.
    /// With the lock, it checks that the domain's files are where this controller works
    /// (``checkModeIsCurrent()``).
    /// - Throws: `cancelled` when the task is cancelled while waiting; `localIOFailure` when the
    ///   lock file cannot be created or locked; `providerDomainTemporarilyUnavailable` when the
    ///   domain's replica mode was converted since this controller was made, or a conversion is
    ///   unfinished.
    func lockForSync(events: EventHandler?) async throws(FileProviderError) -> DomainLock {
        let lock = try await waitForSyncLock(events: events)
        try await blocking { [self] () throws(FileProviderError) in try checkModeIsCurrent() }
        return lock
    }

    /// Checks that the domain is still in the replica mode this controller was made for and no
    /// conversion of it is unfinished: a conversion (``ProviderManager/convertDomain(named:to:events:)``,
    /// which holds the sync lock) moves the files to another folder, and a scan of the old one
    /// would take every file for deleted. Blocking.
    /// - Throws: `providerDomainTemporarilyUnavailable` saying what to do; `localIOFailure` when
    ///   the database fails.
    func checkModeIsCurrent() throws(FileProviderError) {
        if let target = ConversionMarker.target(atPath: conversionMarkerPath) {
            throw ConversionMarker.unfinished(domain.name, target)
        }
        if let current = try store.domain(named: domain.name), current.id == domainID, current.replicaMode != domain.replicaMode {
            throw FileProviderError(
                .providerDomainTemporarilyUnavailable,
                "domain '\(domain.name)' was converted to \(current.replicaMode.rawValue) after this process opened it (in \(domain.replicaMode.rawValue)); nothing was done: run the command again (restart a program that keeps domains open)"
            )
        }
    }

    private func waitForSyncLock(events: EventHandler?) async throws(FileProviderError) -> DomainLock {
        if let lock = try DomainLock.attempt(syncLockPath) { return lock }
        var delay: UInt64 = 10_000_000
        var polls = 0
        var reported = false
        while true {
            if !reported {
                // The holder writes its pid just after locking: give it a few polls to appear.
                let holder = DomainLock.holder(path: syncLockPath)
                if let holder, holder > 0 || polls >= 3 {
                    reported = true
                    let server = DomainLock.holder(path: serveLockPath)
                    events?(.waitingForSync(process: holder > 0 ? holder : nil, serving: holder > 0 && server == holder))
                }
            }
            do {
                try await Task.sleep(nanoseconds: delay)
            } catch {
                throw FileProviderError(.cancelled, "stopped waiting for another sync of \(domain.name) to finish")
            }
            polls += 1
            delay = min(delay * 2, 100_000_000)
            if let lock = try DomainLock.attempt(syncLockPath) { return lock }
        }
    }
}
