import Foundation
import ProviderCore
import ProviderStore

extension DomainContext {
    /// Calls `body` with the items below the folder at `path` (not the folder itself; every
    /// item of the domain for ""), a page of ``subtreePage`` records at a time, each page read
    /// on the executor in its own transaction: a subtree of any size in bounded memory. In path
    /// order, or with `deepestFirst` in reverse path order (every item before the folder that
    /// holds it). The next page starts after (before) the last path of the one before, so
    /// `body` may change or remove the items' rows but not give them other paths. Stops early
    /// when `body` returns `false`.
    /// - Throws: `localIOFailure` when the database fails; what `body` throws.
    func forEachSubtreePage(
        below path: String, deepestFirst: Bool = false, _ body: ([ItemRecord]) async throws(FileProviderError) -> Bool
    ) async throws(FileProviderError) {
        let (store, domainID) = (self.store, self.domainID)
        let pageSize = max(1, subtreePage.withLock { $0 })
        var bound: String?
        while true {
            let from = bound
            let page = try await executor.run {
                deepestFirst
                    ? try store.descendants(domainID: domainID, of: path, before: from, limit: pageSize)
                    : try store.descendants(domainID: domainID, of: path, after: from, limit: pageSize)
            }
            guard let last = page.last?.path else { return }
            bound = last
            guard try await body(page), page.count == pageSize else { return }
        }
    }
}

extension DomainController {
    /// ``DomainContext/forEachSubtreePage(below:deepestFirst:_:)`` in path order.
    /// - Throws: `localIOFailure` when the database fails; what `body` throws.
    func forEachSubtreePage(
        below path: String, _ body: ([ItemRecord]) async throws(FileProviderError) -> Bool
    ) async throws(FileProviderError) {
        try await context.forEachSubtreePage(below: path, body)
    }
}
