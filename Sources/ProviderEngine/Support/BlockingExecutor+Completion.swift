import Foundation
import ProviderCore

extension BlockingExecutor {
    /// Runs blocking work on the executor to its end even when the task is cancelled meanwhile
    /// (short steps that must not stop half-way, such as placing a finished download).
    /// - Throws: what `body` throws.
    func runToCompletion<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws(FileProviderError) -> T {
        let executor = self
        // An unstructured task does not inherit the caller's cancellation.
        let result = await Task { () async -> Result<T, FileProviderError> in
            do throws(FileProviderError) {
                return .success(try await executor.run(body))
            } catch {
                return .failure(error)
            }
        }.value
        return try result.get()
    }
}
