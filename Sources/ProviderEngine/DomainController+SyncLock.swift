import Foundation
import ProviderCore

extension DomainController {
    /// Takes this domain's sync lock (``DomainLock/syncPath(home:domain:)``), waiting while
    /// another sync of the domain holds it, in this process or another (`serve` holds it for
    /// each pass). While it waits it sends ``EngineEvent/waitingForSync(process:serving:)`` once.
    ///
    /// The wait polls the lock (10 ms, doubling up to 100 ms) and ends when the task is cancelled.
    /// - Throws: `cancelled` when the task is cancelled while waiting; `localIOFailure` when the
    ///   lock file cannot be created or locked.
    func lockForSync(events: EventHandler?) async throws(FileProviderError) -> DomainLock {
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
