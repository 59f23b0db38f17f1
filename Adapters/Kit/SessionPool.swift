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
