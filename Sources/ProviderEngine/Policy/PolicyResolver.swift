import ProviderCore
import ProviderStore

/// Answers which content policy applies to an item of one domain: the policy set on the item
/// itself, else on its nearest folder above, else ``ContentPolicy/lazy`` (policies inherit
/// downward, as Apple's content policies and cfapi's pin states).
///
/// Holds the explicit policies of the domain's folders only (and the root's,
/// ``MetadataStore/explicitFolderPolicies(domainID:)``): a file's own policy is in its row
/// (``ItemRecord/contentPolicy``), so a domain whose user pinned a million files one by one
/// holds none of them here. Ask with the item's record (``resolve(_:)-(ItemRecord)``), which
/// brings the item's own policy; a path alone (``resolve(_:)-(String)``) is right for a folder
/// and for a path the database has no row for. A value, so a pass takes one and asks it many
/// times.
public struct PolicyResolver: Sendable {
    /// The explicit policies of folders by path ("" is the root).
    public let folders: [String: ContentPolicy]

    public init(folders: [String: ContentPolicy]) { self.folders = folders }

    /// No policy set on any folder.
    public static let none = PolicyResolver(folders: [:])

    /// A domain's policies as the database has them now: those set on its folders and its root
    /// (``MetadataStore/explicitFolderPolicies(domainID:)``), or with `along`, only those of
    /// the folders that hold that path (a resolver for that one item, in a few indexed reads).
    /// Blocking.
    /// - Throws: `localIOFailure` when the database fails.
    public static func read(from store: MetadataStore, domainID: Int64, along path: String? = nil) throws(FileProviderError)
        -> PolicyResolver
    {
        guard let path else { return PolicyResolver(folders: try store.explicitFolderPolicies(domainID: domainID)) }
        return PolicyResolver(folders: try store.explicitFolderPolicies(domainID: domainID, along: path))
    }

    /// The policy of the item at `path` whose own policy is `own`, and the path it was set on
    /// (`nil` for the default).
    public func resolve(_ path: String, own: ContentPolicy?) -> (policy: ContentPolicy, setOn: String?) {
        if let own { return (own, path) }
        // Most domains set no policy on a folder: `ls` of many rows asks for nothing.
        if folders.isEmpty { return (.lazy, nil) }
        var current = Substring(path)
        while true {
            if let policy = folders[String(current)] { return (policy, String(current)) }
            if current.isEmpty { return (.lazy, nil) }
            if let slash = current.lastIndex(of: "/") {
                current = current[..<slash]
            } else {
                current = ""
            }
        }
    }

    /// The policy of `record`'s item (its own, else its nearest folder's), and where it is set.
    public func resolve(_ record: ItemRecord) -> (policy: ContentPolicy, setOn: String?) {
        resolve(record.path, own: record.contentPolicy)
    }

    /// The policy of the folder (or of the path the database has no row for) at `path`, and
    /// where it is set. A file's own policy is not held here: ask with its record.
    public func resolve(_ path: String) -> (policy: ContentPolicy, setOn: String?) {
        resolve(path, own: nil)
    }

    /// The policy of `record`'s item.
    public func policy(of record: ItemRecord) -> ContentPolicy { resolve(record).policy }
}
