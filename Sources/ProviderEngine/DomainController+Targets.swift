import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// What the per-path loops of materialize, evict and unpin read before they start: the
    /// record at each path and, when asked, the domain's content policies.
    struct Targets: Sendable {
        /// The record at each path, in order, or what ``record(at:)`` throws for it.
        var records: [Result<ItemRecord, FileProviderError>]
        /// The domain's content policies (an empty resolver when not asked for), or the
        /// database's failure.
        var policies: Result<PolicyResolver, FileProviderError>
    }

    /// Reads the records at `paths` (and, with `policies`, the content policies) in one job on
    /// the executor: a command naming many files makes one blocking call, not one per file, and
    /// none on the cooperative pool.
    /// - Throws: `cancelled` when the task was cancelled before the job started (failures of
    ///   the database are in the result, per path).
    func targets(_ paths: [String], policies withPolicies: Bool) async throws(FileProviderError) -> Targets {
        try await executor.run { [self] in
            let records = paths.map { path -> Result<ItemRecord, FileProviderError> in
                do throws(FileProviderError) {
                    return .success(try record(at: path))
                } catch {
                    return .failure(error)
                }
            }
            var resolved = Result<PolicyResolver, FileProviderError>.success(PolicyResolver(explicit: [:]))
            if withPolicies {
                do throws(FileProviderError) {
                    resolved = .success(try policies())
                } catch {
                    resolved = .failure(error)
                }
            }
            return Targets(records: records, policies: resolved)
        }
    }
}
