import Foundation
import ProviderCore
import ProviderStore

/// The content policies the files of a download inherit from their folders, read once per
/// folder: placing 10,000 downloaded files of a few folders asks the database a few times,
/// not 10,000 (each placed file's status says whether it is pinned, ``ReplicaStatus``).
///
/// One is shared by the batches of one ``Downloader/download(_:events:placeholderFree:)`` (their
/// placing jobs run on several threads: thread-safe). It holds at most ``maximumFolders``
/// folders, and forgets them all once its answers are ``maximumAge`` old, so a policy set
/// while a long download runs is read again within that time, as a batch's own memo was (a
/// policy set meanwhile also rewrites the statuses of the files it covers, `PolicySetter`).
final class InheritedPolicies: Sendable {
    /// The most folders remembered before the memo is emptied.
    static let maximumFolders = 1_024
    /// How long answers are kept (nanoseconds of the monotonic clock): about as long as a
    /// batch of small files over a network takes.
    static let maximumAge: UInt64 = 500_000_000

    private let store: MetadataStore
    private let domainID: Int64
    /// By folder path ("" is the root): the policy its files inherit; and when the memo was
    /// started.
    private let memo = Mutex((byFolder: [String: ContentPolicy](), since: DispatchTime.now().uptimeNanoseconds))

    init(store: MetadataStore, domainID: Int64) {
        self.store = store
        self.domainID = domainID
    }

    /// The policy of the file at `path` whose own policy is `own`: its own, else its nearest
    /// folder's, else `lazy`; `nil` when the database cannot be read. Blocking (when the
    /// folder's policy is not known yet).
    func policy(ofFileAt path: String, own: ContentPolicy?) -> ContentPolicy? {
        if let own { return own }
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        let now = DispatchTime.now().uptimeNanoseconds
        let known = memo.withLock { memo -> ContentPolicy? in
            if now &- memo.since > Self.maximumAge {
                memo.byFolder.removeAll(keepingCapacity: true)
                memo.since = now
            }
            return memo.byFolder[folder]
        }
        if let known { return known }
        // Read outside the lock: two threads may read the same folder once each.
        guard let resolver = try? PolicyResolver.read(from: store, domainID: domainID, along: folder) else { return nil }
        let policy = resolver.resolve(folder).policy
        memo.withLock { memo in
            if memo.byFolder.count >= Self.maximumFolders { memo.byFolder.removeAll(keepingCapacity: true) }
            memo.byFolder[folder] = policy
        }
        return policy
    }
}
