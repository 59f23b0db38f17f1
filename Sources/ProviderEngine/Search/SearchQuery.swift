import Foundation
import ProviderCore
import ProviderStore

/// What ``ProviderManager/search(_:pageSize:_:)`` looks for, across domains, offline: Apple's
/// `NSFileProviderSearchQuery` for every domain at once, with the tests of GNU `find`.
public struct SearchQuery: Sendable, Hashable {
    /// Where to look: a domain, or a folder (or item) of one.
    public struct Scope: Sendable, Hashable {
        public var domain: String
        /// Relative path, "" for the whole domain.
        public var path: String
        public init(domain: String, path: String = "") {
            self.domain = domain
            self.path = path
        }
    }

    /// The tests SQLite runs on every row (names, paths, sizes, dates, kinds, downloaded,
    /// dataless, hash). Its ``ItemFilter/below`` is set from each scope.
    public var filter = ItemFilter()
    /// Where to look; empty for every domain, in name order.
    public var scopes: [Scope] = []
    /// Only items whose content policy, their own or inherited, is `eager` (pinned).
    public var pinned = false
    /// Only items a conflict was recorded for (`fileproviderctl conflicts`): the item's path
    /// or the conflicted copy kept beside it.
    public var conflicted = false
    /// Only items with a local change the store does not have yet
    /// (``ProviderManager/unsentChanges(inDomain:)``; a scan of the replica, still offline).
    public var unsent = false

    public init(filter: ItemFilter = ItemFilter(), scopes: [Scope] = []) {
        self.filter = filter
        self.scopes = scopes
    }
}
