import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// The last anchor of a container's change feed, or `nil`.
    public func syncAnchor(domainID: Int64, container: ItemIdentifier) throws(FileProviderError) -> SyncAnchor? {
        try read { db in
            try SyncAnchorRecord.fetchOne(db, key: ["domainID": domainID, "container": container.rawValue])
                .map { SyncAnchor($0.anchor) }
        }
    }

    /// Stores (or, with `nil`, forgets) a container's anchor.
    public func setSyncAnchor(_ anchor: SyncAnchor?, domainID: Int64, container: ItemIdentifier) throws(FileProviderError) {
        try write { db in
            if let anchor {
                try SyncAnchorRecord(domainID: domainID, container: container.rawValue, anchor: anchor.rawValue, updatedAt: Date())
                    .save(db)
            } else {
                _ = try SyncAnchorRecord.deleteOne(db, key: ["domainID": domainID, "container": container.rawValue])
            }
        }
    }

    /// Writes an operation to the journal before it runs; returns it with its id.
    public func journal(_ entry: JournalEntry) throws(FileProviderError) -> JournalEntry {
        try write { db in try Self.insert(entry, in: db) }
    }

    /// Saves a journal entry's new state.
    public func updateJournal(_ entry: JournalEntry) throws(FileProviderError) {
        var entry = entry
        entry.updatedAt = Date()
        try write { [entry] db in try Self.update(entry, in: db) }
    }

    /// Opens the journal entries of operations about to run, in one transaction: an operation
    /// with an unfinished entry takes that entry, marked as a replay when an earlier attempt may
    /// have reached the store (`running` or `pending`; a `failed` entry's attempts were refused,
    /// so nothing was done); any other gets a new one. Every entry returned is `running`, its
    /// attempt counted.
    /// - Throws: `localIOFailure` when the database cannot be written; no entry is opened then.
    public func openJournalEntries(_ entries: [JournalEntry]) throws(FileProviderError) -> [(entry: JournalEntry, replay: Bool)] {
        if entries.isEmpty { return [] }
        let now = Date()
        return try write { db in
            var probe = ParameterBinder(try db.cachedStatement(sql: Self.probeUnfinishedByTemplate), reserving: 0)
            let find = try db.cachedStatement(sql: Self.selectUnfinishedByTemplate)
            return try entries.map { entry in
                // Nearly always none: asked first without a row made (``ParameterBinder``).
                if try probe.first(in: db, binding: entry.domainID, entry.templateIdentifier, { _ in () }) != nil,
                    var earlier = try JournalEntry.fetchOne(find, arguments: [entry.domainID, entry.templateIdentifier])
                {
                    let replay = earlier.state != .failed
                    earlier.state = .running
                    earlier.attempts += 1
                    earlier.updatedAt = now
                    try Self.update(earlier, in: db)
                    return (earlier, replay)
                }
                var entry = entry
                entry.state = .running
                entry.attempts += 1
                return (try Self.insert(entry, in: db), false)
            }
        }
    }

    /// Gives back entries ``openJournalEntries(_:)`` opened for operations that did not run: new
    /// ones are removed, earlier ones are as they were (`pending`, or `failed` when they were no
    /// replay) with their attempt uncounted.
    public func withdrawJournalEntries(_ entries: [(entry: JournalEntry, replay: Bool)]) throws(FileProviderError) {
        if entries.isEmpty { return }
        try write { db in
            let delete = try db.cachedStatement(sql: "DELETE FROM journal WHERE id = ?")
            for (entry, replay) in entries {
                if replay || entry.attempts > 1 {
                    var entry = entry
                    entry.state = replay ? .pending : .failed
                    entry.attempts -= 1
                    try Self.update(entry, in: db)
                } else if let id = entry.id {
                    try delete.execute(arguments: [id])
                }
            }
        }
    }

    static let selectUnfinishedByTemplate =
        "SELECT * FROM journal WHERE domainID = ? AND templateIdentifier = ? AND state <> 'done' LIMIT 1"
    private static let probeUnfinishedByTemplate =
        "SELECT 1 FROM journal WHERE domainID = ? AND templateIdentifier = ? AND state <> 'done' LIMIT 1"

    /// Inserts `entry` in an open transaction; returns it with its id.
    static func insert(_ entry: JournalEntry, in db: Database) throws -> JournalEntry {
        var entry = entry
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO journal (domainID, templateIdentifier, operation, payload, state, attempts, lastError, \
                nextAttemptAt, createdAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        // A new entry (one per file sent): bound through SQLite's calls (``ParameterBinder``),
        // its dates as the text GRDB writes.
        if entry.nextAttemptAt == nil, let created = StoredDate.text(entry.createdAt), let updated = StoredDate.text(entry.updatedAt) {
            let bytes =
                entry.templateIdentifier.utf8.count + entry.operation.utf8.count + entry.payload.utf8.count
                + entry.state.rawValue.utf8.count + (entry.lastError?.utf8.count ?? 0) + created.utf8.count + updated.utf8.count
            var insert = ParameterBinder(statement, reserving: bytes)
            insert.bind(entry.domainID)
            insert.bind(entry.templateIdentifier)
            insert.bind(entry.operation)
            insert.bind(entry.payload)
            insert.bind(entry.state.rawValue)
            insert.bind(Int64(entry.attempts))
            insert.bind(entry.lastError)
            insert.bind(nil as String?)
            insert.bind(created)
            insert.bind(updated)
            try insert.execute(in: db)
            entry.id = db.lastInsertedRowID
            return entry
        }
        try statement.execute(arguments: [
            entry.domainID, entry.templateIdentifier, entry.operation, entry.payload, entry.state.rawValue, entry.attempts,
            entry.lastError, StoredDate.value(entry.nextAttemptAt), StoredDate.value(entry.createdAt),
            StoredDate.value(entry.updatedAt),
        ])
        entry.id = db.lastInsertedRowID
        return entry
    }

    /// Saves `entry`'s new state (it has an id) in an open transaction; an entry that is `done` is deleted
    /// instead (nothing reads a finished operation: the journal keeps what may still need a
    /// replay).
    static func update(_ entry: JournalEntry, in db: Database) throws {
        if entry.state == .done, let id = entry.id {
            var delete = ParameterBinder(try db.cachedStatement(sql: "DELETE FROM journal WHERE id = ?"), reserving: 0)
            delete.bind(id)
            return try delete.execute(in: db)
        }
        try db.cachedStatement(
            sql: "UPDATE journal SET state = ?, attempts = ?, lastError = ?, nextAttemptAt = ?, updatedAt = ? WHERE id = ?"
        ).execute(arguments: [
            entry.state.rawValue, entry.attempts, entry.lastError, StoredDate.value(entry.nextAttemptAt),
            StoredDate.value(entry.updatedAt), entry.id,
        ])
    }

    /// The operations of a domain that are not done, oldest first.
    public func unfinishedOperations(domainID: Int64) throws(FileProviderError) -> [JournalEntry] {
        try read { db in
            try JournalEntry.filter(Column("domainID") == domainID && Column("state") != JournalState.done.rawValue)
                .order(Column("id")).fetchAll(db)
        }
    }

    /// Removes the finished operations of a domain.
    public func pruneJournal(domainID: Int64) throws(FileProviderError) {
        try write { db in
            _ = try JournalEntry.filter(Column("domainID") == domainID && Column("state") == JournalState.done.rawValue)
                .deleteAll(db)
        }
    }

    /// The checkpoint of an interrupted download, or `nil`.
    public func checkpoint(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) -> TransferCheckpoint? {
        try read { db in
            try TransferCheckpoint.fetchOne(db, key: ["domainID": domainID, "identifier": identifier.rawValue])
        }
    }

    /// Saves a download's progress.
    public func saveCheckpoint(_ checkpoint: TransferCheckpoint) throws(FileProviderError) {
        try write { db in try checkpoint.save(db) }
    }

    /// Forgets a download's progress.
    public func removeCheckpoint(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) {
        try write { db in
            _ = try TransferCheckpoint.deleteOne(db, key: ["domainID": domainID, "identifier": identifier.rawValue])
        }
    }

    /// A cached thumbnail for that content version and size, or `nil`.
    public func thumbnail(domainID: Int64, identifier: ItemIdentifier, contentVersion: Data, size: Int)
        throws(FileProviderError) -> Data?
    {
        try read { db in
            try ThumbnailRecord.fetchOne(db, key: ["domainID": domainID, "identifier": identifier.rawValue, "size": size])
                .flatMap { $0.contentVersion == contentVersion ? $0.data : nil }
        }
    }

    /// Caches a thumbnail, replacing one of an older content version.
    public func saveThumbnail(_ record: ThumbnailRecord) throws(FileProviderError) {
        try write { db in try record.save(db) }
    }
}

extension MetadataStore {
    /// Every download checkpoint of a domain, by item.
    public func checkpoints(domainID: Int64) throws(FileProviderError) -> [ItemIdentifier: TransferCheckpoint] {
        try read { db in
            let all = try TransferCheckpoint.filter(Column("domainID") == domainID).fetchAll(db)
            return Dictionary(all.map { (ItemIdentifier($0.identifier), $0) }, uniquingKeysWith: { first, _ in first })
        }
    }
}
