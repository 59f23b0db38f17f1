import Foundation

/// Runs blocking work (a child process, `waitpid`, a polling loop) on a thread of its own and
/// returns its result, so Swift's cooperative pool (two threads here, shared by every test that
/// runs at once) keeps running tasks meanwhile.
///
/// - Throws: whatever `body` throws.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
