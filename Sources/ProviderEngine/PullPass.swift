import Foundation
import ProviderCore
import ProviderStore

/// One folder of the store, reached by sync down's walk.
struct FolderVisit: Sendable {
    /// The folder as the database has it (or is about to: a folder new in this sync).
    var record: ItemRecord
    /// Whether the folder exists in the replica (its parent is populated, or it is the root).
    var isOnDisk: Bool
    /// Whether this sync found the folder.
    var isNew: Bool
    /// The identifiers of the folders above it, from the root down, as the walk reached it
    /// (empty outside a walk): a folder listed with one of them is listed inside itself.
    var ancestors: [ItemIdentifier] = []
}

/// The state of one sync down while the walk goes on: what to write, what went away, what to
/// download. The walk hands it each folder's listing as it arrives, so memory stays bounded by
/// a few folders' worth of items, not the whole store.
struct PullPass {
    /// The walk waits for the database once this many records are waiting (it goes on
    /// listing and placing while fewer wait).
    static let backlog = 8_192
    /// Records go to the database as soon as this many wait and it is idle.
    static let batchSize = 1_024

    var upserts: [ItemRecord] = []
    /// Digests of folders whose listings the waiting records make their rows match, written
    /// after them (``ListingDigest``).
    var listings: [FolderListing] = []
    /// Time spent waiting for the database (the rest of its work overlaps the walk).
    var databaseSeconds = 0.0
    /// The batch the database is writing.
    var writing: Task<Void, any Error>?
    /// Set by the writing task when it is done.
    var writerDone = Mutex(true)
    var isWriterIdle: Bool { writerDone.withLock { $0 } }
    /// Stored items missing from their folder's listing; settled at the end.
    var gone: [ItemRecord] = []
    /// Items that moved to another folder under the same identifier (not gone).
    var movedIn = Set<ItemIdentifier>()
    /// New files by content version, to recognise a path-derived move (a stored file gone and
    /// a new one with the same contents). `nil` during a domain's first sync.
    var newFilesByVersion: [Data: [ItemIdentifier]]?
    var listedFolders = Set<ItemIdentifier>()
    /// Folders this pass found new (a change feed may bring their items in a later batch).
    var newFolders = Set<ItemIdentifier>()
    var failedFolders: [String] = []
    var redownload: [ItemRecord] = []
    /// The domain's content policies as the pass began.
    var policies: PolicyResolver
    /// Entries this sync may still write into folders it found new.
    var budget: Int
    /// Whether the database held items before this sync (then moves are looked for).
    let hadItems: Bool
    /// A walk of the whole store: what it did not reach went away. A change feed names what
    /// went away itself.
    var sweeps = true

    init(policies: PolicyResolver, budget: Int, hadItems: Bool) {
        self.policies = policies
        self.budget = budget
        self.hadItems = hadItems
        newFilesByVersion = hadItems ? [:] : nil
    }

    /// Whether `record`'s item is kept downloaded (its policy, its own or inherited, is
    /// ``ContentPolicy/eager``).
    func isPinned(_ record: ItemRecord) -> Bool {
        policies.policy(of: record) == .eager
    }

    /// Hands the waiting records to the database on the executor, so the walk goes on while
    /// SQLite writes. One batch is in flight at a time; with `wait`, returns once everything
    /// is written (before anything reads what this pass wrote).
    mutating func flush(to context: DomainContext, wait: Bool = false) async throws(FileProviderError) {
        if let inFlight = writing {
            writing = nil
            let waited = Date()
            defer { databaseSeconds += Date().timeIntervalSince(waited) }
            do {
                try await inFlight.value
            } catch {
                throw FileProviderError.wrap(error)
            }
        }
        if upserts.isEmpty && listings.isEmpty { return }
        let (batch, kept) = (upserts, listings)
        upserts = []
        listings = []
        // Room for a full backlog: growing an array of records copies every record again.
        upserts.reserveCapacity(Self.backlog + Self.batchSize)
        let (store, domainID, executor) = (context.store, context.domainID, context.executor)
        let done = writerDone
        done.withLock { $0 = false }
        // A domain's first sync writes rows the database does not have: inserted and counted per
        // batch (a row it has after all, the batch is written as any other).
        let isNew = !hadItems
        writing = Task {
            defer { done.withLock { $0 = true } }
            try await executor.run {
                if isNew {
                    try store.insertNew(domainID: domainID, records: batch, listings: kept)
                } else {
                    try store.apply(domainID: domainID, upserts: batch, deletions: [], listings: kept)
                }
            }
        }
        if wait { try await flush(to: context) }
    }
}
