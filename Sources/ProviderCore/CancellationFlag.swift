import Foundation

/// Set when the task waiting on a transfer is cancelled; the transfer checks it as bytes move.
///
/// The one cancellation helper for backends: a job on a ``BlockingExecutor`` thread is not
/// interrupted by task cancellation, so a long transfer runs inside
/// ``withCancellationFlag(_:_:)`` and calls ``check()`` between chunks (the local backend checks
/// every MiB). In ProviderCore, so a backend in a package of its own has it without the
/// built-in adapters' plumbing.
///
/// ```swift
/// let flag = CancellationFlag()
/// try await withCancellationFlag(flag) { () async throws(FileProviderError) in
///     try await executor.run { () throws -> Void in
///         while moreToCopy {
///             try flag.check()  // throws `cancelled`
///             // copy one chunk
///         }
///     }
/// }
/// ```
public final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var cancelled = false

    public init() {}

    public func cancel() { lock.withLock { cancelled = true } }
    public var isCancelled: Bool { lock.withLock { cancelled } }

    /// Throws `cancelled` once the flag is set.
    public func check() throws(FileProviderError) {
        if isCancelled { throw FileProviderError(.cancelled, "cancelled") }
    }
}

/// Runs `body`, setting `flag` when the calling task is cancelled, so blocking work on another
/// thread that checks the flag stops.
///
/// - Throws: what `body` throws, as `FileProviderError`.
public func withCancellationFlag<T: Sendable>(
    _ flag: CancellationFlag, _ body: () async throws(FileProviderError) -> T
) async throws(FileProviderError) -> T {
    do {
        return try await withTaskCancellationHandler {
            try await body()
        } onCancel: {
            flag.cancel()
        }
    } catch {
        throw FileProviderError.wrap(error)
    }
}
