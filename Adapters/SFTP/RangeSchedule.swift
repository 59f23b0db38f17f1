import Foundation
import ProviderCore

/// Splits one transfer into ranges that several connections take in order, and lets a
/// download write a range only once every range before it is written, so the destination
/// always holds a contiguous prefix of the file (what the engine resumes from).
///
/// Shared by the threads of the connections working on the transfer; every method is
/// thread-safe. ``waitForTurn(_:)`` blocks the calling thread, which is always a connection's
/// own thread, never Swift's cooperative pool.
final class RangeSchedule: @unchecked Sendable {
    /// The end of the transfer (exclusive).
    let end: Int64
    /// The size of every range but the last.
    let rangeSize: Int64
    private let condition = NSCondition()
    private var next: Int64
    private var written: Int64
    private var failure: FileProviderError?

    /// A schedule for the bytes `start..<end` in ranges of `rangeSize` bytes.
    init(from start: Int64, to end: Int64, rangeSize: Int64) {
        precondition(rangeSize > 0 && start <= end)
        self.end = end
        self.rangeSize = rangeSize
        next = start
        written = start
    }

    /// The next range to transfer; `nil` once every range was handed out or the transfer failed.
    func take() -> Range<Int64>? {
        condition.lock()
        defer { condition.unlock() }
        guard failure == nil, next < end else { return nil }
        let range = next..<min(end, next + rangeSize)
        next = range.upperBound
        return range
    }

    /// Blocks until every range before `range` is written; `false` when the transfer failed.
    func waitForTurn(_ range: Range<Int64>) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while failure == nil && written != range.lowerBound { condition.wait() }
        return failure == nil
    }

    /// Records that `range`, whose turn it was, is written, and wakes the range after it.
    func wrote(_ range: Range<Int64>) {
        condition.lock()
        written = range.upperBound
        condition.broadcast()
        condition.unlock()
    }

    /// Ends the transfer: no more ranges are handed out and every waiter wakes. The first
    /// error is the one kept.
    func fail(_ error: FileProviderError) {
        condition.lock()
        if failure == nil { failure = error }
        condition.broadcast()
        condition.unlock()
    }

    /// Where the bytes written without a gap from the start end.
    var writtenPrefix: Int64 { condition.withLock { written } }

    /// The error that ended the transfer, if one did.
    var error: FileProviderError? { condition.withLock { failure } }
}
