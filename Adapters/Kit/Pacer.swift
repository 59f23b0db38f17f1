import Foundation

/// Holds back every request of one client after a server said it is overloaded (`429`, or `503`
/// such as S3's `SlowDown`): the request that got the answer waits its backoff (or the
/// server's `Retry-After`), and so does every other request of the client before its next
/// attempt, rather than going on at full speed while the first one waits (rclone's
/// `lib/pacer` does the same). Times are on the monotonic clock.
final class Pacer: @unchecked Sendable {
    private let lock = NSLock()
    /// No attempt starts before this uptime, in nanoseconds.
    private var heldUntil: UInt64 = 0

    /// Holds every request back for `seconds` from now (never shortening a longer hold).
    func hold(seconds: Double) {
        guard seconds > 0 else { return }
        let until = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        lock.withLock { heldUntil = max(heldUntil, until) }
    }

    /// Whether requests are held back now.
    var isHolding: Bool { lock.withLock { heldUntil } > DispatchTime.now().uptimeNanoseconds }

    /// Waits until the hold is over; returns at once when there is none, or when the task is
    /// cancelled.
    func wait() async {
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            let until = lock.withLock { heldUntil }
            guard until > now else { return }
            do { try await Task.sleep(nanoseconds: until - now) } catch { return }
        }
    }
}
