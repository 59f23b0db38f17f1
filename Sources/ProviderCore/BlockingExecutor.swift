import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs blocking work (file I/O loops, blocking C libraries) on threads of its own, never on
/// Swift's cooperative pool, and bridges the result back with a continuation.
///
/// Each executor owns a fixed number of threads that take jobs in order. An adapter that needs a
/// blocking session per thread (libssh2, libcurl) makes an executor with one thread per session.
public final class BlockingExecutor: @unchecked Sendable {
    /// The queue the threads share. Threads hold it strongly, never the executor, so an executor
    /// can be freed while its threads finish.
    private final class JobQueue: @unchecked Sendable {
        let condition = NSCondition()
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var isShutDown = false
        static let finished: @Sendable () -> Void = {}

        func loop() {
            while true {
                condition.lock()
                while head == jobs.count && !isShutDown { condition.wait() }
                if head == jobs.count && isShutDown {
                    condition.unlock()
                    return
                }
                let job = jobs[head]
                // Drop the queue's reference at once: a job's captures (a batch of records, a
                // buffer) must not live until the queue is compacted.
                jobs[head] = JobQueue.finished
                head += 1
                if head > 1024 && head * 2 > jobs.count {
                    jobs.removeFirst(head)
                    head = 0
                }
                condition.unlock()
                job()
            }
        }

        func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            if isShutDown { return false }
            jobs.append(job)
            condition.signal()
            return true
        }

        func shutDown() {
            condition.lock()
            isShutDown = true
            condition.broadcast()
            condition.unlock()
        }
    }

    private let queue = JobQueue()
    public let threadCount: Int

    /// Starts `threads` threads named `name-N`.
    public init(name: String, threads: Int) {
        precondition(threads > 0)
        threadCount = threads
        for index in 0..<threads {
            let queue = self.queue
            let threadName = "\(name)-\(index)"
            let thread = Thread {
                ThreadName.setCurrent(threadName)
                PoolCheck.markBlockingThread()
                queue.loop()
            }
            thread.name = threadName
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    deinit { queue.shutDown() }

    /// Stops the threads once the queued jobs have run. Later `run` calls throw `cancelled`.
    public func shutDown() { queue.shutDown() }

    private func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool { queue.enqueue(job) }

    /// Runs `body` on one of the executor's threads and returns its result.
    ///
    /// - Throws: what `body` throws, as `FileProviderError` (other errors are wrapped as
    ///   `localIOFailure`); `cancelled` when the task was cancelled before the job started or
    ///   the executor is shut down.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws(FileProviderError) -> T {
        if Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
        return try await runEvenIfCancelled(body)
    }

    /// Runs `body` on one of the executor's threads and returns its result, also when the task
    /// is cancelled: for short steps a cancelled operation still takes (a check before it
    /// starts, recording its outcome), which must not run on the cooperative pool instead.
    ///
    /// - Throws: what `body` throws, as `FileProviderError` (other errors are wrapped as
    ///   `localIOFailure`); `cancelled` when the executor is shut down.
    public func runEvenIfCancelled<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws(FileProviderError) -> T {
        let result: Result<T, FileProviderError> = await withCheckedContinuation { continuation in
            let accepted = enqueue {
                do {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(FileProviderError.wrap(error)))
                }
            }
            if !accepted {
                continuation.resume(returning: .failure(FileProviderError(.cancelled, "the executor is shut down")))
            }
        }
        return try result.get()
    }
}

/// Turns a failed POSIX call into a `FileProviderError` naming the path.
public enum POSIXError {
    /// The error for `errno` after an operation on `path`.
    public static func error(_ operation: String, path: String, errno code: Int32 = errno) -> FileProviderError {
        let reason = String(cString: strerror(code))
        let text = "\(operation) \(path): \(reason)"
        switch code {
        case ENOENT, ENOTDIR: return FileProviderError(.noSuchItem, text)
        case EEXIST: return FileProviderError(.filenameCollision, text)
        case ENOTEMPTY: return FileProviderError(.directoryNotEmpty, text)
        case EACCES, EPERM, EROFS: return FileProviderError(.permissionDenied, text)
        case ENOSPC, EDQUOT: return FileProviderError(.insufficientQuota, text)
        case ENAMETOOLONG: return FileProviderError(.invalidFilename, text)
        default: return FileProviderError(.localIOFailure, text)
        }
    }

    /// The error for `errno` after writing a local file that is the engine's (a download's
    /// destination): `fileWriteOutOfSpace` for `ENOSPC` and `EDQUOT` (the local disk is full,
    /// not the store), `localIOFailure` for anything else (the store is not at fault).
    public static func localWriteError(_ operation: String, path: String, errno code: Int32 = errno) -> FileProviderError {
        let text = "\(operation) \(path): \(String(cString: strerror(code)))"
        return FileProviderError(code == ENOSPC || code == EDQUOT ? .fileWriteOutOfSpace : .localIOFailure, text)
    }

    /// Returns `value` when it is not -1, else throws the error for `errno`.
    @discardableResult
    public static func check<T: BinaryInteger>(_ value: T, _ operation: String, path: String) throws(FileProviderError) -> T {
        if value == -1 { throw error(operation, path: path) }
        return value
    }
}
