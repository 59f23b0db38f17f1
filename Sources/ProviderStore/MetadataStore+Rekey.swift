import Foundation
import GRDB
import ProviderCore

/// Re-keying a moved folder (its items get the paths and identifiers the store gives them now)
/// in memory bounded by a batch, yet in one transaction: ``beginRekey(domainID:)``, then the new
/// records staged a batch at a time (``stageRekeyed(domainID:_:)``), then
/// ``finishRekey(domainID:path:)`` replaces the old subtree with them at once.
///
/// The staged rows wait in the `itemRekey` table (migration v14), on disk: a subtree of any size
/// costs no memory while it is staged. A process killed before the end leaves the old records,
/// as if the move had not been recorded yet, and staged rows that the next
/// ``beginRekey(domainID:)`` of the domain forgets.
extension MetadataStore {
    private static let stageOne = "INSERT INTO itemRekey (\(ItemRecord.columnList)) VALUES (\(ItemRecord.placeholders))"
    /// Staged rows copied into `item` per statement: SQLite keeps each statement's journal (the
    /// pages it changed, for undoing it alone) in memory (`temp_store = MEMORY`), so one
    /// statement for a million rows would hold them all.
    static let rekeyCopyRows = 4_096

    /// Starts re-keying a folder of a domain: forgets what an earlier, unfinished one staged.
    /// - Throws: `localIOFailure` when the database fails.
    public func beginRekey(domainID: Int64) throws(FileProviderError) {
        try write { db in try db.execute(sql: "DELETE FROM itemRekey WHERE domainID = ?", arguments: [domainID]) }
    }

    /// Stages records of the folder being re-keyed (see ``beginRekey(domainID:)``).
    /// - Throws: `localIOFailure` when the database fails.
    public func stageRekeyed(domainID: Int64, _ records: [ItemRecord]) throws(FileProviderError) {
        if records.isEmpty { return }
        try write { db in
            let insert = try db.cachedStatement(sql: Self.stageOne)
            let arena = BindArena()
            for index in records.indices { try Self.execute(insert, records[index...index], arena: arena, in: db) }
        }
    }

    /// Replaces the records of the item at `path` and everything below it with the staged
    /// records, in one transaction (as ``replaceSubtree(domainID:path:with:)`` does), and
    /// forgets the staged rows.
    /// - Throws: `localIOFailure` when the database fails.
    public func finishRekey(domainID: Int64, path: String) throws(FileProviderError) {
        try write { db in
            try Self.deleteSubtree(domainID: domainID, path: path, in: db)
            let copy = try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO item (\(ItemRecord.columnList))
                    SELECT \(ItemRecord.columnList) FROM itemRekey WHERE domainID = ? AND rowid > ? ORDER BY rowid LIMIT ?
                    """)
            let last = try db.cachedStatement(
                sql: "SELECT max(rowid) FROM (SELECT rowid FROM itemRekey WHERE domainID = ? AND rowid > ? ORDER BY rowid LIMIT ?)")
            var after: Int64 = 0
            while let next = try Int64.fetchOne(last, arguments: [domainID, after, Self.rekeyCopyRows]) {
                try copy.execute(arguments: [domainID, after, Self.rekeyCopyRows])
                after = next
            }
            try db.execute(sql: "DELETE FROM itemRekey WHERE domainID = ?", arguments: [domainID])
        }
    }
}
