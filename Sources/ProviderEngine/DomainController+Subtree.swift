import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// Calls `body` with the items below the folder at `path` (not the folder itself; every
    /// item of the domain for ""), in path order, a page of ``subtreePage`` records at a time,
    /// each page read on the executor in its own transaction: a subtree of any size in bounded
    /// memory. The next page starts after the last path of the one before, so `body` may change
    /// the items' rows but not their paths. Stops early when `body` returns `false`.
    /// - Throws: `localIOFailure` when the database fails; what `body` throws.
    func forEachSubtreePage(
        below path: String, _ body: ([ItemRecord]) async throws(FileProviderError) -> Bool
    ) async throws(FileProviderError) {
        let (store, domainID) = (self.store, self.domainID)
        let pageSize = max(1, subtreePage.withLock { $0 })
        var after: String?
        while true {
            let from = after
            let page = try await executor.run { try store.descendants(domainID: domainID, of: path, after: from, limit: pageSize) }
            guard let last = page.last?.path else { return }
            after = last
            guard try await body(page), page.count == pageSize else { return }
        }
    }
}
