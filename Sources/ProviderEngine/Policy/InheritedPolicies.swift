import ProviderCore
import ProviderStore

/// The content policies the files of a batch of downloads inherit from their folders, read once
/// per folder: placing 10,000 downloaded files of a few folders asks the database a few times,
/// not 10,000 (each placed file's status says whether it is pinned, ``ReplicaStatus``).
///
/// Meant for one batch on one thread (not `Sendable`); it holds at most
/// ``maximumFolders`` folders and starts again past that. A policy set while the batch runs
/// rewrites the statuses of the files it covers (`PolicySetter`), so a stale answer here does
/// not last.
final class InheritedPolicies {
    /// The most folders remembered before the memo is emptied.
    static let maximumFolders = 1_024

    private let store: MetadataStore
    private let domainID: Int64
    /// By folder path ("" is the root): the policy its files inherit.
    private var byFolder: [String: ContentPolicy] = [:]

    init(store: MetadataStore, domainID: Int64) {
        self.store = store
        self.domainID = domainID
    }

    /// The policy of the file at `path` whose own policy is `own`: its own, else its nearest
    /// folder's, else `lazy`; `nil` when the database cannot be read. Blocking.
    func policy(ofFileAt path: String, own: ContentPolicy?) -> ContentPolicy? {
        if let own { return own }
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        if let known = byFolder[folder] { return known }
        guard let resolver = try? PolicyResolver.read(from: store, domainID: domainID, along: folder) else { return nil }
        let policy = resolver.resolve(folder).policy
        if byFolder.count >= Self.maximumFolders { byFolder.removeAll(keepingCapacity: true) }
        byFolder[folder] = policy
        return policy
    }
}
