import Foundation

/// How far a whole-file fill in place (``Downloader/fillInPlace(_:)``) has written its file
/// from the first byte without a gap, for programs that read the file while it is filled: the
/// FUSE layout answers a read once the fill has passed its bytes, instead of once the whole file
/// is there, so a program reading in order runs alongside the download.
///
/// The fill's ``ContentSink`` moves it (``advance(to:)``): the sink takes a piece once the
/// backend wrote it into the file, so every byte below the mark is in the file. A fill that
/// fails gives its blocks back: it calls ``revoke()`` first, which stops new answers and waits
/// for the ones being sent, so no program is ever answered from a hole. ``end()`` says the fill
/// is over (done or failed); a reader waiting for bytes the mark never reached then waits for
/// the fill itself.
///
/// Waiting blocks the calling thread: only threads of their own (FUSE's), never Swift's
/// cooperative pool.
final class FillWatermark: @unchecked Sendable {
    private let condition = NSCondition()
    private var written: Int64 = 0
    private var ended = false
    private var revoked = false
    /// Answers being sent from bytes below the mark (``answer(through:_:)``).
    private var answering = 0

    /// The fill wrote every byte below `offset` (it never moves back).
    func advance(to offset: Int64) {
        condition.lock()
        defer { condition.unlock() }
        guard offset > written, !revoked else { return }
        written = offset
        condition.broadcast()
    }

    /// The fill is over: readers waiting for bytes the mark did not reach stop waiting.
    func end() {
        condition.lock()
        defer { condition.unlock() }
        ended = true
        condition.broadcast()
    }

    /// The fill is about to give its blocks back (it failed): no answer is sent from the file
    /// any more, and this returns once the answers being sent are out. Blocks its thread (the
    /// executor's, which gives the blocks back).
    func revoke() {
        condition.lock()
        defer { condition.unlock() }
        revoked = true
        condition.broadcast()
        while answering > 0 { condition.wait() }
    }

    /// Waits until the fill has written every byte below `end`, then runs `answer` (which reads
    /// them from the file) while they cannot be given back, and returns `true`. Returns `false`
    /// without running it when the fill ended or failed first: the caller waits for the fill.
    func answer(through end: Int64, _ answer: () -> Void) -> Bool {
        condition.lock()
        while written < end && !ended && !revoked { condition.wait() }
        guard written >= end && !revoked else {
            condition.unlock()
            return false
        }
        answering += 1
        condition.unlock()
        answer()
        condition.lock()
        answering -= 1
        if answering == 0 { condition.broadcast() }
        condition.unlock()
        return true
    }
}
