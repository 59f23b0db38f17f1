import Foundation
import ProviderCore
import ProviderStore

/// An item ``ProviderManager/search(_:pageSize:_:)`` found: Apple's
/// `NSFileProviderSearchResult`, with the domain it is in.
public struct SearchResult: Sendable {
    /// The domain's name.
    public var domain: String
    /// The item's row.
    public var record: ItemRecord
    /// Where programs see the item: the domain's replica folder and the item's path (its real
    /// name, as `urlForItem(withPersistentIdentifier:)` gives; a file that is not downloaded is
    /// a `.placeholder` beside it in a `placeholder-files` replica).
    public var localPath: String

    public init(domain: String, record: ItemRecord, localPath: String) {
        self.domain = domain
        self.record = record
        self.localPath = localPath
    }

    /// `DOMAIN:/path`.
    public var location: String { "\(domain):/\(record.path)" }
}
