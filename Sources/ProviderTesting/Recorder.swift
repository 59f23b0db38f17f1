import Foundation

/// Values recorded from concurrent code (callbacks on other threads, hooks), read back by the
/// test.
public final class Recorder<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Value] = []

    public init() {}

    /// Records a value. Any thread.
    public func add(_ value: Value) { lock.withLock { stored.append(value) } }

    /// Everything recorded so far, in order.
    public var values: [Value] { lock.withLock { stored } }
}
