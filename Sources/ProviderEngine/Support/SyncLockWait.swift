import Foundation
import ProviderCore
import ProviderSystem

/// Waiting for a domain's sync lock (``DomainLock/syncPath(home:domain:)``) while another sync
/// of the domain holds it, in this process or another: a sync (``DomainController``) and a
/// replica conversion (``ProviderManager/convertDomain(named:to:onAccess:events:)``) both wait here.
///
/// Every look at the lock files (open, `flock`, reading the holder's pid) runs on the engine's
/// executor, never on the cooperative pool; between looks the task sleeps, 10 ms doubling up to
/// 100 ms. The wait ends when the lock is taken or the task is cancelled.
struct SyncLockWait {
    /// The sync lock file.
    let path: String
    /// The domain's serve lock file, to tell whether the holder is the `serve` running the
    /// domain; `nil` when the waiter does not ask.
    var serveLockPath: String?
    /// Polls to wait for the holder to write its pid before reporting without it (the holder
    /// writes it just after locking). 0 reports at the first refusal.
    var pidGrace = 3
    /// Runs the looks at the lock files.
    let executor: BlockingExecutor

    /// Who holds the lock, as the waiter reports it once.
    struct Holder: Sendable {
        /// The holder's process id, `nil` when it has not written it yet.
        var process: Int32?
        /// Whether the holder is the `serve` process running the domain.
        var serving: Bool
    }

    /// Takes the lock, waiting while someone else holds it; calls `waiting` once, when the
    /// first attempt was refused and the holder is known (or ``pidGrace`` polls passed).
    /// - Throws: `cancelled` with `cancelledMessage` when the task is cancelled while waiting;
    ///   `localIOFailure` when the lock file cannot be created or locked.
    func lock(cancelledMessage: @autoclosure () -> String, waiting: (Holder) -> Void) async throws(FileProviderError)
        -> DomainLock
    {
        var delay: UInt64 = 10_000_000
        var polls = 0
        var reported = false
        while true {
            let (lock, holder) = try await look(askingHolder: !reported, polls: polls)
            if let lock { return lock }
            if let holder {
                reported = true
                waiting(holder)
            }
            do {
                try await Task.sleep(nanoseconds: delay)
            } catch {
                throw FileProviderError(.cancelled, cancelledMessage())
            }
            polls += 1
            delay = min(delay * 2, 100_000_000)
        }
    }

    /// One attempt at the lock, on the executor (also when the task is cancelled: a lock taken
    /// is returned, not dropped); with `askingHolder`, who holds it when the attempt is refused
    /// (`nil` while the pid is not written and the grace polls last).
    private func look(askingHolder: Bool, polls: Int) async throws(FileProviderError) -> (DomainLock?, Holder?) {
        let path = path
        let serveLockPath = serveLockPath
        let grace = pidGrace
        return try await executor.runEvenIfCancelled { () throws -> (DomainLock?, Holder?) in
            if let lock = try DomainLock.attempt(path) { return (lock, nil) }
            guard askingHolder else { return (nil, nil) }
            guard let pid = DomainLock.holder(path: path) else {
                // Released between the attempt and the look: the next attempt takes it.
                return (nil, grace == 0 ? Holder(process: nil, serving: false) : nil)
            }
            guard pid > 0 || polls >= grace else { return (nil, nil) }
            let serving = pid > 0 && serveLockPath.map { DomainLock.holder(path: $0) == pid } == true
            return (nil, Holder(process: pid > 0 ? pid : nil, serving: serving))
        }
    }
}
