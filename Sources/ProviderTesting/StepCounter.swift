import Foundation

/// Counts calls from any thread (a fault server's handler): which step of a script a call is.
public final class StepCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    public init() {}

    /// The number of calls before this one (0 for the first).
    public func next() -> Int {
        lock.withLock {
            defer { value += 1 }
            return value
        }
    }
}
