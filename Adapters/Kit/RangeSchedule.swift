import Foundation
import ProviderCore

/// Splits one transfer into ranges that several connections take in order, and follows how
/// far the bytes are written without a gap from the start (the prefix a download can resume
/// from), however the ranges' writes interleave.
///
/// Shared by the threads (SFTP's connections) or tasks (``RangedDownload``'s requests) working
/// on the transfer; every method is thread-safe. Memory does not grow with the transfer: it
/// holds the ranges in flight only.
public final class RangeSchedule: @unchecked Sendable {
    /// The end of the transfer (exclusive).
    public let end: Int64
    /// The size of every range but the last.
    public let rangeSize: Int64
    private let lock = NSLock()
    private var next: Int64
    /// Every byte below this is written; the range starting here (if any) is the oldest one
    /// still in flight.
    private var complete: Int64
    /// The ranges handed out and not complete yet: start → (end, bytes written from the start).
    private var inFlight: [Int64: (end: Int64, written: Int64)] = [:]
    private var failure: FileProviderError?
    /// The threads inside ``work(yielding:_:)`` now, and whether no more may start
    /// (``closeAndWaitForWorkers()``); guarded by ``workersCondition``.
    private var workers = 0
    private var closed = false
    private let workersCondition = NSCondition()
    /// Calls `onAdvance` in order, and never with a smaller prefix than before.
    private let reportLock = NSLock()
    private var reported: Int64
    private let onAdvance: (@Sendable (_ prefix: Int64, _ rangesCompleted: Bool) -> Void)?

    /// A schedule for the bytes `start..<end` in ranges of `rangeSize` bytes.
    ///
    /// - Parameters:
    ///   - start: the first byte to transfer (the prefix before it is written).
    ///   - end: the end of the transfer (exclusive), at least `start`.
    ///   - rangeSize: the size of every range but the last, more than 0.
    ///   - onAdvance: called each time the prefix grows, with the new prefix and whether whole
    ///     ranges were completed by this step; in increasing order, one call at a time.
    public init(
        from start: Int64, to end: Int64, rangeSize: Int64,
        onAdvance: (@Sendable (_ prefix: Int64, _ rangesCompleted: Bool) -> Void)? = nil
    ) {
        precondition(rangeSize > 0 && start <= end)
        self.end = end
        self.rangeSize = rangeSize
        self.onAdvance = onAdvance
        next = start
        complete = start
        reported = start
    }

    /// The next range to transfer; `nil` once every range was handed out or the transfer failed.
    public func take() -> Range<Int64>? {
        lock.withLock { () -> Range<Int64>? in
            guard failure == nil, next < end else { return nil }
            let range = next..<min(end, next + rangeSize)
            next = range.upperBound
            inFlight[range.lowerBound] = (range.upperBound, 0)
            return range
        }
    }

    /// Runs `body` on ranges taken one after the other until none is left, the transfer failed
    /// or `yield` says to stop; the first error `body` throws ends the transfer.
    /// Returns at once after ``closeAndWaitForWorkers()``.
    public func work(yielding yield: () -> Bool, _ body: (Range<Int64>) throws(FileProviderError) -> Void) {
        let entered = workersCondition.withLock { () -> Bool in
            if closed { return false }
            workers += 1
            return true
        }
        guard entered else { return }
        defer {
            workersCondition.withLock {
                workers -= 1
                workersCondition.broadcast()
            }
        }
        while !yield(), let range = take() {
            do throws(FileProviderError) {
                try body(range)
            } catch {
                fail(error)
                return
            }
        }
    }

    /// Records that the next `count` bytes of `range` (taken with ``take()``) are written, in
    /// order within the range; reports the prefix if it grew.
    public func wrote(_ count: Int64, in range: Range<Int64>) {
        advance(range) { $0 += count }
    }

    /// Records that the bytes of `range` (taken with ``take()``) are written from its start up
    /// to `offset` (a transfer that reports where it is, not how much it just wrote); a smaller
    /// `offset` than before changes nothing. Reports the prefix if it grew.
    public func wrote(upTo offset: Int64, in range: Range<Int64>) {
        let written = min(offset, range.upperBound) - range.lowerBound
        advance(range) { $0 = max($0, written) }
    }

    /// Updates the bytes written of `range` with `update`, then follows and reports the prefix.
    private func advance(_ range: Range<Int64>, _ update: (inout Int64) -> Void) {
        let advanced = lock.withLock { () -> (Int64, Bool)? in
            let before = (prefix: prefixLocked, complete: complete)
            if var head = inFlight[range.lowerBound] {
                update(&head.written)
                inFlight[range.lowerBound] = head
            }
            while let head = inFlight[complete], complete + head.written == head.end {
                inFlight[complete] = nil
                complete = head.end
            }
            let after = prefixLocked
            return after > before.prefix ? (after, complete > before.complete) : nil
        }
        guard let (prefix, rangesCompleted) = advanced, let onAdvance else { return }
        reportLock.withLock {
            guard prefix > reported else { return }
            reported = prefix
            onAdvance(prefix, rangesCompleted)
        }
    }

    /// The written prefix; the lock is held.
    private var prefixLocked: Int64 { complete + (inFlight[complete]?.written ?? 0) }

    /// Lets no thread start working any more, and waits until those working are done: every
    /// range handed out is then written or failed. A helper still connecting when the
    /// transfer's own thread ran out of ranges is not waited for (it finds nothing to do).
    public func closeAndWaitForWorkers() {
        workersCondition.withLock {
            closed = true
            while workers > 0 { workersCondition.wait() }
        }
    }

    /// Ends the transfer: no more ranges are handed out. The first error is the one kept.
    public func fail(_ error: FileProviderError) {
        lock.withLock {
            if failure == nil { failure = error }
        }
    }

    /// Where the bytes written without a gap from the start end.
    public var writtenPrefix: Int64 { lock.withLock { prefixLocked } }

    /// The error that ended the transfer, if one did.
    public var error: FileProviderError? { lock.withLock { failure } }
}
