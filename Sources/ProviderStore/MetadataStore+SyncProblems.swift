import Foundation
import GRDB
import ProviderCore

/// What a domain's last finished sync left undone: counts, and the first problems with their
/// paths and reasons (`syncOutcome` and `syncProblem`).
public struct SyncOutcomeRecord: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "syncOutcome"
    public var domainID: Int64
    /// Items of the store the sync skipped.
    public var skipped: Int
    /// Local changes it did not send.
    public var notSent: Int
    /// When it finished.
    public var at: Date

    public init(domainID: Int64, skipped: Int, notSent: Int, at: Date = Date()) {
        self.domainID = domainID
        self.skipped = skipped
        self.notSent = notSent
        self.at = at
    }
}

/// One problem of a domain's last finished sync.
public struct SyncProblemRecord: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "syncProblem"
    public var id: Int64?
    public var domainID: Int64
    /// `skipped` (an item of the store) or `notSent` (a local change).
    public var kind: String
    /// The item's path in the domain, starting with `/`.
    public var path: String
    /// Why, for people.
    public var reason: String

    public init(domainID: Int64, kind: String, path: String, reason: String) {
        self.domainID = domainID
        self.kind = kind
        self.path = path
        self.reason = reason
    }
}

extension MetadataStore {
    /// Replaces what the last sync of a domain left undone with `outcome` and its first
    /// problems, in one transaction.
    /// - Throws: `localIOFailure` when the database fails.
    public func recordSyncOutcome(_ outcome: SyncOutcomeRecord, problems: [SyncProblemRecord]) throws(FileProviderError) {
        try write { db in
            try db.cachedStatement(sql: "DELETE FROM syncProblem WHERE domainID = ?").execute(arguments: [outcome.domainID])
            // Statements of its own, not GRDB's `Codable` records: every sync ends here, and the
            // first encoding of a process (with a `DateFormatter` for the date) cost a command
            // about 1 ms.
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO syncOutcome (domainID, skipped, notSent, at) VALUES (?, ?, ?, ?)")
                .execute(arguments: [outcome.domainID, outcome.skipped, outcome.notSent, StoredDate.value(outcome.at)])
            let insert = try db.cachedStatement(sql: "INSERT INTO syncProblem (domainID, kind, path, reason) VALUES (?, ?, ?, ?)")
            for problem in problems {
                try insert.execute(arguments: [outcome.domainID, problem.kind, problem.path, problem.reason])
            }
        }
    }

    /// What the last finished sync of a domain left undone, with at most `limit` of its
    /// problems in the order they came; `nil` when no sync finished since the database
    /// recorded these.
    /// - Throws: `localIOFailure` when the database fails.
    public func lastSyncOutcome(domainID: Int64, limit: Int) throws(FileProviderError) -> (
        outcome: SyncOutcomeRecord, problems: [SyncProblemRecord]
    )? {
        try read { db in
            guard let outcome = try SyncOutcomeRecord.fetchOne(db, key: domainID) else { return nil }
            let problems = try SyncProblemRecord.filter(Column("domainID") == domainID).order(Column("id")).limit(max(0, limit))
                .fetchAll(db)
            return (outcome, problems)
        }
    }

    /// How many items of a domain are excluded from sync, and the first `limit` of them by path
    /// (a count and a page: never the whole list).
    /// - Throws: `localIOFailure` when the database fails.
    public func excludedItems(domainID: Int64, limit: Int) throws(FileProviderError) -> (count: Int, first: [ExcludedItemRecord]) {
        try read { db in
            let request = ExcludedItemRecord.filter(Column("domainID") == domainID)
            return (try request.fetchCount(db), try request.order(Column("path")).limit(max(0, limit)).fetchAll(db))
        }
    }

    /// How many operations of a domain's journal the store refused (`failed`) or did not finish
    /// (`pending`, `running`): local changes not in the store yet, counted by SQL.
    /// - Throws: `localIOFailure` when the database fails.
    public func unfinishedOperationCount(domainID: Int64) throws(FileProviderError) -> (failed: Int, unfinished: Int) {
        try read { db in
            let failed =
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM journal WHERE domainID = ? AND state = 'failed'", arguments: [domainID])
                ?? 0
            let other =
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM journal WHERE domainID = ? AND state IN ('pending', 'running')", arguments: [domainID])
                ?? 0
            return (failed, other)
        }
    }
}
