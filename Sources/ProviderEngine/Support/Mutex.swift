import Foundation

/// A value behind a lock, for state shared between tasks and threads.
package final class Mutex<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    package init(_ value: Value) { self.value = value }

    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// Puts `replacement` in and returns the value it replaces, which the caller then holds
    /// alone (an array taken out can be changed in place, not copied first).
    package func exchange(_ replacement: Value) -> Value {
        withLock { value in
            defer { value = replacement }
            return value
        }
    }
}

/// A lock tasks wait for without blocking a thread: one holder at a time, waiters served in
/// order. Not reentrant.
final class AsyncLock: Sendable {
    private let state = Mutex<(locked: Bool, waiters: [CheckedContinuation<Void, Never>])>(
        (false, []))

    /// Runs `body` while holding the lock.
    func withLock<T, E: Error>(_ body: () async throws(E) -> T) async throws(E) -> T {
        await lock()
        defer { unlock() }
        return try await body()
    }

    private func lock() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = state.withLock { state -> Bool in
                if !state.locked {
                    state.locked = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if acquired { continuation.resume() }
        }
    }

    private func unlock() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}

/// A one-time event a thread signals and tasks wait for: a watcher thread's end.
package final class Latch: Sendable {
    package init() {}

    private let state = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Signals the event and wakes every waiter. Any thread.
    package func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.done = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the event has happened.
    package func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}
