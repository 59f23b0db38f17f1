import Foundation
import ProviderCore
import ProviderStore

/// What a sync did.
public struct SyncReport: Codable, Sendable {
    public var domain: String
    public var listedItems = 0
    /// Folders listed exactly as the last time their rows were made to match a listing, so
    /// neither read nor compared again (``ListingDigest``).
    public var unchangedFolders = 0
    /// Pages of the store's flat listing (``ProviderCore/FlatListing``) the walk read its
    /// folders from; 0 when it listed folder by folder.
    public var flatListingPages = 0
    public var added = 0
    public var updated = 0
    public var moved = 0
    public var deleted = 0
    public var downloaded = 0
    /// Downloaded files evicted instead of downloaded again after their contents changed in
    /// the store, by their content policy (`evict-on-remote-update`, `online-only`).
    public var evictedOnUpdate = 0
    /// Local creations, edits, moves and deletions sent to the store.
    public var uploaded = 0
    /// Conflicts resolved by keeping both versions (see `fileproviderctl conflicts`).
    public var conflicts = 0
    /// Folders of the replica sync up read and compared with the database (each pass counted):
    /// with a watcher's or a layout's record of the changes, only the folders that changed.
    public var localFoldersCompared = 0
    /// Whether sync up compared the whole replica (no record of the changes could be trusted:
    /// the first sync of a `serve`, a watcher that dropped events, a folder moved, the periodic
    /// full comparison; for a layout that records every change, only after an unclean stop).
    public var comparedWholeReplica = false
    /// Local files still being written, left for the next sync.
    public var pendingLocal: [String] = []
    /// Local changes found but not sent because the sync was interrupted.
    public var unsent = 0
    /// Items left as they were, with why (an unsafe name, local changes kept, an error).
    public var notices: [String] = []
    /// Items of the store this sync skipped (``SyncProblem/Kind/skipped``).
    public var skipped = 0
    /// Local changes this sync did not send (``SyncProblem/Kind/notSent``).
    public var notSent = 0
    /// The first ``problemLimit`` problems, with their paths and reasons.
    public var problems: [SyncProblem] = []
    /// The store stopped answering while the sync listed it (a folder below the root failed
    /// with an error that backs the domain off: unreachable, not authenticated, out of quota):
    /// what was listed is synced, the rest kept as it was, and the domain backs off as after a
    /// failed sync. `nil` when every folder answered.
    public var unreachable: String?
    public var seconds = 0.0
    /// Time spent listing the store, changing the replica, and writing the database.
    public var phases = SyncPhases()

    public init(domain: String) { self.domain = domain }
}
