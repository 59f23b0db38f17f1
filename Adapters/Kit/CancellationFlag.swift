import Foundation
import ProviderCore

/// Set when the task waiting on a transfer is cancelled; the transfer checks it as bytes move.
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
