import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderSystem

/// Runs automatic eviction in `serve`: a pass of an ``Evictor`` over the served domains every
/// ``interval`` seconds, after each sync and when asked (``ProviderManager/requestEviction()``,
/// for example after a file was fetched on access). Passes run one at a time; requests that
/// come during a pass make one more pass after it. A domain whose sync is running is passed
/// over until the next pass (the loop never waits for a sync).
///
/// Evictions are logged by the evictor (one line each, with the reason); a pass's notices (a
/// budget that cannot be met) are logged when they change, not at every pass.
final class EvictionLoop: Sendable {
    let evictor: Evictor
    let interval: Double
    let logger: Logger
    private let wakeup = Wakeup()
    private let lastNotices = Mutex<Set<String>>([])

    init(manager: ProviderManager, domains: [String], interval: Double, logger: Logger) {
        evictor = Evictor(manager: manager, domains: domains, waitForLocks: false, method: .lease, logger: logger)
        self.interval = max(0.05, interval)
        self.logger = logger
    }

    /// Asks for a pass soon. Any thread.
    func poke() { wakeup.signal(.local) }

    /// Ends ``run()`` (after the pass under way). Any thread.
    func stop() { wakeup.signal(.stop) }

    /// Runs passes until ``stop()`` or cancellation.
    func run() async {
        let manager = evictor.manager
        manager.evictionWakeup.withLock { [wakeup] in $0 = { wakeup.signal(.local) } }
        defer { manager.evictionWakeup.withLock { $0 = nil } }
        while !Task.isCancelled {
            do {
                report(try await evictor.run())
            } catch {
                if error.code == .cancelled { break }
                logger.warning("automatic eviction: \(error.message)")
            }
            await wakeup.wait(until: Date().addingTimeInterval(interval))
            if wakeup.take().contains(.stop) { break }
        }
    }

    private func report(_ pass: EvictionPass) {
        if !pass.evicted.isEmpty {
            logger.info("evicted \(pass.evicted.count) file\(pass.evicted.count == 1 ? "" : "s") (\(ByteCount.format(pass.evictedBytes)))")
        }
        let notices = Set(pass.notices)
        let new = lastNotices.withLock { last in
            defer { last = notices }
            return notices.subtracting(last)
        }
        for notice in pass.notices where new.contains(notice) {
            // A busy domain is routine; the rest needs the user.
            if notice.contains("passed over: its sync is running") {
                logger.debug("\(notice)")
            } else {
                logger.notice("\(notice)")
            }
        }
    }
}
