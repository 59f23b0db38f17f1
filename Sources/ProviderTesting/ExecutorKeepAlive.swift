import Foundation
import ProviderCore

/// Keeps every `BlockingExecutor` this module makes alive for the life of the process.
///
/// `BlockingExecutor`'s threads reach their executor through an `unowned` reference; a thread
/// that starts after its executor was freed crashes ("attempted to read an unowned reference").
/// Until that is fixed in ProviderCore, executors are never freed: after `shutDown()` their
/// threads exit, so what stays is one small object per backend.
enum ExecutorKeepAlive {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var executors: [BlockingExecutor] = []

    /// Makes an executor that is never freed.
    static func make(name: String, threads: Int) -> BlockingExecutor {
        let executor = BlockingExecutor(name: name, threads: threads)
        lock.withLock { executors.append(executor) }
        return executor
    }
}
