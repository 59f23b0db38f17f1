import Foundation

/// Values recorded from concurrent code (callbacks on other threads, hooks), read back by the
/// test.
public final class Recorder<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Value] = []

    public init() {}

    /// Records a value; returns how many are recorded now, this one included. Any thread.
    @discardableResult
    public func add(_ value: Value) -> Int {
        lock.withLock {
            stored.append(value)
            return stored.count
        }
    }

    /// Everything recorded so far, in order.
    public var values: [Value] { lock.withLock { stored } }
}
