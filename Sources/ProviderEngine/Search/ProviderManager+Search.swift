import Foundation
import ProviderCore
import ProviderStore

extension ProviderManager {
    /// Finds the items of every domain (or of the query's scopes) that `query` matches, from
    /// the database, offline (Apple's `NSFileProviderSearching`): `body` gets them a page at a
    /// time, so a search of millions of items holds one page in memory. A domain's items come in
    /// identifier order (path order for a folder scope), the domains in the order of the scopes
    /// (by name without scopes). The database is read on the engine's own threads.
    /// - Throws: `providerDomainNotFound` for a scope's unknown domain; `noSuchItem` for a scope
    ///   path the database has no item at; `invalidArgument` for a regular expression that does
    ///   not compile; `localIOFailure` when the database fails; what `body` throws; what
    ///   ``unsentChanges(inDomain:)`` throws when the query asks for unsent items.
    public func search(
        _ query: SearchQuery, pageSize: Int = 4_096, _ body: ([SearchResult]) throws(FileProviderError) -> Void
    ) async throws(FileProviderError) {
        let store = self.store
        let scopes: [(DomainRecord, String)] = try await blocking { [self] () throws(FileProviderError) in
            if query.scopes.isEmpty { return try self.domains().sorted { $0.name < $1.name }.map { ($0, "") } }
            return try query.scopes.map { scope throws(FileProviderError) in
                let domain = try self.domain(named: scope.domain)
                if !scope.path.isEmpty, let id = domain.id, try store.item(domainID: id, path: scope.path) == nil {
                    throw FileProviderError(
                        .noSuchItem,
                        "no item at \(scope.domain):/\(scope.path); run 'fileproviderctl sync \(scope.domain)' to refresh")
                }
                return (domain, scope.path)
            }
        }
        for (domain, below) in scopes {
            guard let domainID = domain.id else { continue }
            let policies: PolicyResolver? =
                query.pinned
                ? try await blocking { () throws(FileProviderError) in try PolicyResolver.read(from: store, domainID: domainID) } : nil
            let conflicted: Set<String>? =
                query.conflicted
                ? try await blocking { () throws(FileProviderError) in
                    Set(try store.conflicts(domainID: domainID).flatMap { [$0.path] + [$0.keptPath].compactMap { $0 } })
                } : nil
            let unsent: Set<String>? =
                query.unsent ? Set(try await unsentChanges(inDomain: domain.name).map { String($0.path.dropFirst()) }) : nil
            var domainFilter = query.filter
            domainFilter.below = below
            let filter = domainFilter
            let root = domain.replicaPath.hasSuffix("/") ? String(domain.replicaPath.dropLast()) : domain.replicaPath
            var cursor: SearchCursor?
            while true {
                let after = cursor
                let page = try await blocking { () throws(FileProviderError) in
                    try store.searchPage(domainID: domainID, filter: filter, after: after, limit: pageSize)
                }
                guard let last = page.last else { break }
                cursor = SearchCursor(last)
                let found = page.filter { record in
                    if let policies, policies.policy(of: record) != .eager { return false }
                    if let conflicted, !conflicted.contains(record.path) { return false }
                    if let unsent, !unsent.contains(record.path) { return false }
                    return true
                }
                if !found.isEmpty {
                    try body(found.map { SearchResult(domain: domain.name, record: $0, localPath: root + "/" + $0.path) })
                }
                if page.count < pageSize { break }
            }
        }
    }
}
