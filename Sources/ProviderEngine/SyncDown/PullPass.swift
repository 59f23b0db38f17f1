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
    /// Whether ``record`` is still to be queued: during a domain's first sync a new folder's
    /// record goes to the database with its own listing, not its parent's
    /// (``PullPass/defersFolderRecords``).
    var recordPending = false
    /// A new folder the walk lists while it is being made in the replica: the walk waits for it
    /// before placing its items (``FolderPlacer/settle(_:pass:report:)``).
    var creation: FolderCreation.Slot?
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
    /// Digests of folders whose new subfolders' records wait for their own listings
    /// (``defersFolderRecords``), by folder, with how many still wait: each goes to
    /// ``listings`` once the last of them is queued.
    var digestsAwaitingSubfolders: [ItemIdentifier: (listing: FolderListing, waiting: Int)] = [:]
    /// Time spent waiting for the database (the rest of its work overlaps the walk).
    var databaseSeconds = 0.0
    /// The batch the database is writing.
    var writing: Task<Void, any Error>?
    /// Set by the writing task when it is done.
    var writerDone = Mutex(true)
    /// The array the last batch was written from, its records still in it: the walk empties
    /// it, keeping its capacity, and gathers the next batch in it. (A fresh array for 9,216
    /// records is memory the allocator maps anew and the kernel faults in page by page, every
    /// batch: 0.2 CPU-seconds of a first sync of 1,000,000 items.)
    let spareBatch = Mutex<[ItemRecord]>([])
    var isWriterIdle: Bool { writerDone.withLock { $0 } }
    /// Stored items missing from their folder's listing; settled at the end.
    var gone: [ItemRecord] = []
    /// Stored items the store replaced by a new one of the same name, re-keyed to it
    /// (``FolderPlacer/pairReplaced(_:gone:)``): a replaced folder's children take the new
    /// parent before it is listed; what else the database kept of the old identifier goes.
    var replaced: [(old: ItemIdentifier, new: ItemIdentifier, kind: ItemKind)] = []
    /// Items that moved to another folder under the same identifier (not gone).
    var movedIn = Set<ItemIdentifier>()
    /// New files by content version, to recognise a path-derived move (a stored file gone and
    /// a new one with the same contents). `nil` during a domain's first sync.
    var newFilesByVersion: [Data: [ItemIdentifier]]?
    var listedFolders = Set<ItemIdentifier>()
    /// Folders this pass found new (a change feed may bring their items in a later batch).
    var newFolders = Set<ItemIdentifier>()
    /// The last creation of new folders the walk started (``FolderCreation``): each waits for
    /// the one before, so the walk waits for this one before it ends, and none outlives the sync.
    var lastCreation: FolderCreation?
    var failedFolders: [String] = []
    var redownload: [ItemRecord] = []
    /// New paths of items the store moved into a pinned folder or out of one
    /// (``noteMove(from:to:)``): their statuses are refreshed once the pass has written the new
    /// paths (``StatusRefresher``). Not what lies below one of them (refreshed with it).
    var movedAcrossPins = Set<String>()
    /// The domain's content policies as the pass began.
    var policies: PolicyResolver
    /// Entries this sync may still write into folders it found new.
    var budget: Int
    /// Whether the database held items before this sync (then moves are looked for).
    let hadItems: Bool
    /// Whether a new folder's record is queued with the folder's own listing rather than its
    /// parent's (``FolderVisit/recordPending``), and each batch is written in key order: then
    /// a first sync's rows reach the database in about the order of its indexes, and SQLite
    /// appends them instead of inserting each folder's rows between rows written before
    /// (1.8 instead of 3.2 CPU-seconds of SQLite for 1,000,000 rows). Only during a domain's
    /// first sync with no policy on any folder: nothing then reads a folder's row back from
    /// the database before the walk reaches the folder (a pinned folder is populated from
    /// its stored rows).
    let defersFolderRecords: Bool
    /// A walk of the whole store: what it did not reach went away. A change feed names what
    /// went away itself.
    var sweeps = true

    init(policies: PolicyResolver, budget: Int, hadItems: Bool) {
        self.policies = policies
        self.budget = budget
        self.hadItems = hadItems
        defersFolderRecords = !hadItems && policies.folders.isEmpty
        newFilesByVersion = hadItems ? [:] : nil
    }

    /// Queues the record of a folder whose record waited for its own listing
    /// (``FolderVisit/recordPending``), and its parent's digest once no other subfolder's
    /// record waits.
    mutating func queuePendingFolder(_ record: ItemRecord, alreadyQueued: Bool = false) {
        if !alreadyQueued { upserts.append(record) }
        guard var awaiting = digestsAwaitingSubfolders[record.parentIdentifier] else { return }
        awaiting.waiting -= 1
        if awaiting.waiting > 0 {
            digestsAwaitingSubfolders[record.parentIdentifier] = awaiting
        } else {
            digestsAwaitingSubfolders[record.parentIdentifier] = nil
            listings.append(awaiting.listing)
        }
    }

    /// Whether `record`'s item is kept downloaded (its policy, its own or inherited, is
    /// ``ContentPolicy/eager``).
    func isPinned(_ record: ItemRecord) -> Bool {
        policies.policy(of: record) == .eager
    }

    /// Notes an item the store moved from `old` to `new` when its pinned-ness changed with its
    /// path (``isPinned(_:)`` of both), unless a folder above it is noted already; an ordinary
    /// move costs two policy look-ups.
    mutating func noteMove(from old: ItemRecord, to new: ItemRecord) {
        guard old.path != new.path, isPinned(old) != isPinned(new) else { return }
        var parent = RelativePath(new.path).parent
        while !parent.isEmpty {
            if movedAcrossPins.contains(parent) { return }
            parent = RelativePath(parent).parent
        }
        movedAcrossPins.insert(new.path)
    }

    /// Hands the waiting records to the database on the executor, so the walk goes on while
    /// SQLite writes. One batch is in flight at a time; with `wait`, returns once everything
    /// is written (before anything reads what this pass wrote).
    mutating func flush(to context: DomainContext, wait: Bool = false) async throws(FileProviderError) {
        if defersFolderRecords && !upserts.isEmpty {
            // In key order (the bytes, SQLite's BINARY collation; any order is correct, this
            // one is cheap to insert), each record moved once. Sorted before waiting for the
            // batch in flight, so the sort overlaps its writing instead of leaving the writer,
            // the first sync's critical path, idle between two batches.
            upserts.sortMovingOnce(by: \.identifier, <)
        }
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
        if upserts.isEmpty && listings.isEmpty {
            spareBatch.withLock { $0.removeAll(keepingCapacity: true) }
            return
        }
        var next = spareBatch.exchange([])
        swap(&upserts, &next)
        // The writer takes the batch out of the box (the only reference: not copied) and puts
        // it in `spareBatch` once written, records and all.
        let batch = Mutex(consume next)
        let kept = listings
        listings = []
        let (store, domainID, executor, spare) = (context.store, context.domainID, context.executor, spareBatch)
        let done = writerDone
        done.withLock { $0 = false }
        // A domain's first sync writes rows the database does not have: inserted and counted per
        // batch (a row it has after all, the batch is written as any other).
        let isNew = !hadItems
        writing = Task {
            defer { done.withLock { $0 = true } }
            try await executor.run {
                let records = batch.exchange([])
                if isNew {
                    try store.insertNew(domainID: domainID, records: records, listings: kept)
                } else {
                    try store.apply(domainID: domainID, upserts: records, deletions: [], listings: kept)
                }
                spare.withLock { $0 = records }
            }
        }
        // The records of the batch written before go here, on the walk's thread, while the
        // writer writes this one: releasing their strings and versions was 5% of the writer's
        // thread, the first sync's critical path. Room for a full backlog: growing an array of
        // records copies every record again.
        upserts.removeAll(keepingCapacity: true)
        upserts.reserveCapacity(Self.backlog + Self.batchSize)
        if wait { try await flush(to: context) }
    }
}
