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
public enum PoolCheck {
    /// Counts the blocking calls made on the cooperative pool by the tasks it is bound to.
    public final class Counter: Sendable {
        private let value = Atomic<Int>(0)
        public init() {}
        public var count: Int { value.load(ordering: .relaxed) }
        func increment() { value.add(1, ordering: .relaxed) }
    }

    @TaskLocal public static var counter: Counter?

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

    /// Called before blocking work: counts it (and traces it) when it runs on the pool.
    public static func note() {
        guard counter != nil || traces, isOnCooperativePool else { return }
        counter?.increment()
        if traces {
            let stack = Thread.callStackSymbols.prefix(12).joined(separator: "\n")
            FileHandle.standardError.write(Data("POOL-USE\n\(stack)\n".utf8))
        }
    }

    /// Runs `body` and returns how many blocking calls its tasks made on the cooperative pool.
    public static func counting(_ body: () async throws -> Void) async rethrows -> Int {
        let counter = Counter()
        try await $counter.withValue(counter) { try await body() }
        return counter.count
    }
}
