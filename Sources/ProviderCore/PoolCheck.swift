import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Tells when blocking work runs on Swift's cooperative pool: code running in a task on a
/// thread that is not one of a ``BlockingExecutor``'s. The metadata store calls ``note()``
/// before each transaction and the engine's replica at its blocking entry points (file reads
/// and writes, renames, `lstat`); tests count those calls (``counting(_:)``) to check that
/// per-item database and file work goes to the engine's threads, and
/// `FILEPROVIDER_TRACE_POOL=1` prints the stack of each one to standard error.
///
/// **Strict mode** makes such a call a failure when it happens inside one of the engine's
/// operations (``during(_:_:)``: a sync, a materialize, a population, an on-access fill, ...):
/// tests turn it on with ``enforce(_:)`` (each call is reported to their handler, which
/// records an issue), and `FILEPROVIDER_STRICT_POOL=1` turns it on for a process (each call
/// prints its stack and ends the process). Calls outside an operation (a program's or a
/// test's own reads of the database) are not checked; ``exempt(_:)`` takes a call inside one
/// out (a test's fake store that reads the database).
public enum PoolCheck {
    /// Counts the blocking calls made on the cooperative pool by the tasks it is bound to.
    public final class Counter: Sendable {
        private let value = Atomic<Int>(0)
        public init() {}
        public var count: Int { value.load(ordering: .relaxed) }
        func increment() { value.add(1, ordering: .relaxed) }
    }

    @TaskLocal public static var counter: Counter?

    /// The engine operation the task runs (``during(_:_:)``), for strict mode and its messages.
    @TaskLocal public static var operation: String?

    /// Where strict mode reports a call on the pool inside an operation (``enforce(_:)``).
    private static let handler = Mutex<(@Sendable (String) -> Void)?>(nil)
    private static let enforced = Atomic<Bool>(false)

    private static let strictProcess = ProcessInfo.processInfo.environment["FILEPROVIDER_STRICT_POOL"] == "1"

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private static let traces = ProcessInfo.processInfo.environment["FILEPROVIDER_TRACE_POOL"] != nil

    /// Marks the calling thread as one of a ``BlockingExecutor``'s.
    static func markBlockingThread() {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
    }

    /// Whether the calling thread is one of a ``BlockingExecutor``'s.
    public static var isBlockingThread: Bool { pthread_getspecific(key) != nil }

    /// Whether the caller runs in a task on a thread that is not a ``BlockingExecutor``'s (the
    /// cooperative pool, or another executor's).
    public static var isOnCooperativePool: Bool {
        !isBlockingThread && withUnsafeCurrentTask { $0 != nil }
    }

    /// Called before blocking work: counts it (and traces it) when it runs on the pool; under
    /// strict mode inside an operation, reports it (or ends the process).
    public static func note() {
        guard counter != nil || traces || strictProcess || enforced.load(ordering: .relaxed), isOnCooperativePool else { return }
        counter?.increment()
        if traces {
            let stack = Thread.callStackSymbols.prefix(14).joined(separator: "\n")
            FileHandle.standardError.write(Data("POOL-USE \(operation ?? "-")\n\(stack)\n".utf8))
        }
        guard let operation else { return }
        let message =
            "a blocking call (a database transaction or a replica file operation) ran on the cooperative pool during \(operation); FILEPROVIDER_TRACE_POOL=1 prints its stack"
        if let handler = handler.withLock({ $0 }) {
            handler(message)
        } else if strictProcess {
            let stack = Thread.callStackSymbols.prefix(24).joined(separator: "\n")
            FileHandle.standardError.write(Data("FILEPROVIDER_STRICT_POOL: \(message)\n\(stack)\n".utf8))
            abort()
        }
    }

    /// Runs one of the engine's operations (`name`: "sync", "materialize", ...): under strict
    /// mode, a blocking call on the pool inside it is a failure.
    /// - Throws: what `body` throws.
    public static func during<T, E: Error>(_ name: String, _ body: () async throws(E) -> T) async throws(E) -> T {
        if operation != nil { return try await body() }
        let result: Result<T, E> = await $operation.withValue(name) {
            do throws(E) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Turns strict mode on for the process: from now on each blocking call made on the pool
    /// inside an engine operation is passed to `handler` (a test records an issue). The last
    /// handler given is used.
    public static func enforce(_ handler: @escaping @Sendable (String) -> Void) {
        Self.handler.withLock { $0 = handler }
        enforced.store(true, ordering: .relaxed)
    }

    /// Runs `body` outside any engine operation: its blocking calls on the pool are counted and
    /// traced but never a strict-mode failure (a test's own work inside an operation, such as a
    /// fake store's hook that reads the database).
    public static func exempt<T>(_ body: () throws -> T) rethrows -> T {
        try $operation.withValue(nil) { try body() }
    }

    /// Runs `body` and returns how many blocking calls its tasks made on the cooperative pool.
    public static func counting(_ body: () async throws -> Void) async rethrows -> Int {
        let counter = Counter()
        try await $counter.withValue(counter) { try await body() }
        return counter.count
    }
}
