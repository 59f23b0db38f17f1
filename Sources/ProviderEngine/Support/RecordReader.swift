import Foundation
import ProviderCore
import ProviderStore

/// Reads the records the domain's commands act on, on the executor (never on the cooperative
/// pool): the records at the paths a command names, with the content policies, in one job; and
/// the items below a folder a page at a time, so a subtree of any size is read in bounded
/// memory. Over the domain's ``DomainContext``; the ``DomainController`` holds one for
/// materialize, evict, pin and populate, and sync's parts (settling, uploads, moves) make one
/// over their context for the paging.
///
/// A value of references only: copies read the same database.
struct RecordReader: Sendable {
    let context: DomainContext

    /// What the per-path loops of materialize, evict and unpin read before they start: the
    /// record at each path and, when asked, the domain's content policies.
    struct Targets: Sendable {
        /// The record at each path, in order, or what ``RecordReader/record(at:)`` throws for it.
        var records: [Result<ItemRecord, FileProviderError>]
        /// The domain's content policies (the folders'; an empty resolver when not asked for), or
        /// the database's failure. Ask it with each record: a file's own policy is in its row.
        var policies: Result<PolicyResolver, FileProviderError>
    }

    /// The stored item at a path. Blocking.
    /// - Throws: `noSuchItem` saying how to refresh; `localIOFailure` when the database fails.
    func record(at path: String) throws(FileProviderError) -> ItemRecord {
        guard let record = try context.store.item(domainID: context.domainID, path: path) else {
            throw FileProviderError(
                .noSuchItem, "no item at \(context.display(path)); run 'fileproviderctl sync \(context.domain.name)' to refresh")
        }
        return record
    }

    /// Reads the records at `paths` (and, with `policies`, the content policies) in one job on
    /// the executor: a command naming many files makes one blocking call, not one per file, and
    /// none on the cooperative pool.
    /// - Throws: `cancelled` when the task was cancelled before the job started (failures of
    ///   the database are in the result, per path).
    func targets(_ paths: [String], policies withPolicies: Bool) async throws(FileProviderError) -> Targets {
        try await context.executor.run { [self] in
            let records = paths.map { path -> Result<ItemRecord, FileProviderError> in
                do throws(FileProviderError) {
                    return .success(try record(at: path))
                } catch {
                    return .failure(error)
                }
            }
            var resolved = Result<PolicyResolver, FileProviderError>.success(PolicyResolver.none)
            if withPolicies {
                do throws(FileProviderError) {
                    resolved = .success(try context.policies())
                } catch {
                    resolved = .failure(error)
                }
            }
            return Targets(records: records, policies: resolved)
        }
    }

    /// Calls `body` with the items below the folder at `path` (not the folder itself; every
    /// item of the domain for ""), a page of ``DomainContext/subtreePage`` records at a time,
    /// each page read on the executor in its own transaction: a subtree of any size in bounded
    /// memory. In path order, or with `deepestFirst` in reverse path order (every item before
    /// the folder that holds it). The next page starts after (before) the last path of the one
    /// before, so `body` may change or remove the items' rows but not give them other paths.
    /// With `readingAhead` the next page is read while `body` works on the one before (two
    /// pages held at most): `body` must then not change the rows of later pages either.
    /// Stops early when `body` returns `false`.
    /// - Throws: `localIOFailure` when the database fails; what `body` throws.
    func forEachSubtreePage(
        below path: String, deepestFirst: Bool = false, readingAhead: Bool = false,
        _ body: ([ItemRecord]) async throws(FileProviderError) -> Bool
    ) async throws(FileProviderError) {
        let (store, domainID, executor) = (context.store, context.domainID, context.executor)
        let pageSize = max(1, context.subtreePage.withLock { $0 })
        let read = { @Sendable (from: String?) async throws(FileProviderError) -> [ItemRecord] in
            try await executor.run {
                deepestFirst
                    ? try store.descendants(domainID: domainID, of: path, before: from, limit: pageSize)
                    : try store.descendants(domainID: domainID, of: path, after: from, limit: pageSize)
            }
        }
        // The next page, read while `body` runs (`readingAhead`); cancelled when the loop ends
        // without it.
        var ahead: Task<Result<[ItemRecord], FileProviderError>, Never>?
        defer { ahead?.cancel() }
        var page = try await read(nil)
        while true {
            guard let last = page.last?.path else { return }
            let full = page.count == pageSize
            if readingAhead && full {
                ahead = Task { () async -> Result<[ItemRecord], FileProviderError> in
                    do throws(FileProviderError) {
                        return .success(try await read(last))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            guard try await body(page), full else { return }
            if let next = ahead {
                ahead = nil
                page = try await next.value.get()
            } else {
                page = try await read(last)
            }
        }
    }
}
