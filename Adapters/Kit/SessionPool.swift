import Foundation

/// A fixed set of sessions (connections, each usually with a thread of its own) and the tasks
/// waiting for one: ``acquire()`` hands out an idle session or waits, first come first served,
/// until ``release(_:)`` gives one back.
public final class SessionPool<Session: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var idle: [Session]
    private let all: [Session]
    private var waiters: [CheckedContinuation<Session, Never>] = []

    public init(_ sessions: [Session]) {
        idle = sessions
        all = sessions
    }

    /// Every session of the pool, idle or not (to shut them down).
    public var sessions: [Session] { all }

    /// An idle session, after waiting for one when all are in use.
    public func acquire() async -> Session {
        await withCheckedContinuation { continuation in
            lock.lock()
            if let session = idle.popLast() {
                lock.unlock()
                continuation.resume(returning: session)
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }

    /// Takes up to `count` sessions that are idle now, without waiting (for work that only
    /// helps when sessions are free); give each back with ``release(_:)``.
    public func takeIdle(upTo count: Int) -> [Session] {
        lock.withLock {
            var taken: [Session] = []
            while taken.count < count, let session = idle.popLast() { taken.append(session) }
            return taken
        }
    }

    /// Whether a task is waiting for a session (helpers then give theirs back).
    public var hasWaiters: Bool { lock.withLock { !waiters.isEmpty } }

    /// Gives a session back: to the longest waiter, else to the idle ones.
    public func release(_ session: Session) {
        lock.lock()
        if waiters.isEmpty {
            idle.append(session)
            lock.unlock()
        } else {
            let waiter = waiters.removeFirst()
            lock.unlock()
            waiter.resume(returning: session)
        }
    }

}
