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
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var jobsHead = 0
    private var isShutDown = false
    private var threads: [Thread] = []
    public let threadCount: Int

    /// Starts `threads` threads named `name-N`.
    public init(name: String, threads: Int) {
        precondition(threads > 0)
        threadCount = threads
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.loop() }
            thread.name = "\(name)-\(index)"
            thread.stackSize = 1 << 20
            self.threads.append(thread)
            thread.start()
        }
    }

    deinit {
        condition.lock()
        isShutDown = true
        condition.broadcast()
        condition.unlock()
    }

    /// Stops the threads once the queued jobs have run. Later `run` calls throw `cancelled`.
    public func shutDown() {
        condition.lock()
        isShutDown = true
        condition.broadcast()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobsHead == jobs.count && !isShutDown { condition.wait() }
            if jobsHead == jobs.count && isShutDown {
                condition.unlock()
                return
            }
            let job = jobs[jobsHead]
            jobsHead += 1
            if jobsHead > 1024 && jobsHead * 2 > jobs.count {
                jobs.removeFirst(jobsHead)
                jobsHead = 0
            }
            condition.unlock()
            job()
        }
    }

    private func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if isShutDown { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Runs `body` on one of the executor's threads and returns its result.
    ///
    /// - Throws: what `body` throws, as `FileProviderError` (other errors are wrapped as
    ///   `localIOFailure`); `cancelled` when the task was cancelled before the job started or
    ///   the executor is shut down.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws(FileProviderError) -> T {
        if Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
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

    /// Returns `value` when it is not -1, else throws the error for `errno`.
    @discardableResult
    public static func check<T: BinaryInteger>(_ value: T, _ operation: String, path: String) throws(FileProviderError) -> T {
        if value == -1 { throw error(operation, path: path) }
        return value
    }
}
