import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// Logs a resolved conflict.
    public func recordConflict(_ conflict: ConflictRecord) throws(FileProviderError) {
        var conflict = conflict
        try write { db in try conflict.insert(db) }
    }

    /// The conflicts of a domain (or of all domains), newest first.
    public func conflicts(domainID: Int64?) throws(FileProviderError) -> [ConflictRecord] {
        try read { db in
            var request = ConflictRecord.order(Column("createdAt").desc, Column("id").desc)
            if let domainID { request = request.filter(Column("domainID") == domainID) }
            return try request.fetchAll(db)
        }
    }

    /// Deletes the records of an item and everything below it.
    public func deleteSubtree(domainID: Int64, path: String) throws(FileProviderError) {
        try write { db in try Self.deleteSubtree(domainID: domainID, path: path, in: db) }
    }

    /// Replaces the records of an item and everything below it with `records` (a moved folder
    /// with its new paths and identifiers), in one transaction: a process killed in between
    /// never leaves the folder's items unrecorded, which the next scan would take for new local
    /// files and upload again beside themselves.
    public func replaceSubtree(domainID: Int64, path: String, with records: [ItemRecord]) throws(FileProviderError) {
        try write { db in
            try Self.deleteSubtree(domainID: domainID, path: path, in: db)
            try Self.apply(domainID: domainID, upserts: records, deletions: [], in: db)
        }
    }

    static func deleteSubtree(domainID: Int64, path: String, in db: Database) throws {
        // Two statements: with `OR` SQLite scans the whole domain instead of `item_path`.
        try db.cachedStatement(sql: "DELETE FROM item WHERE domainID = ? AND path = ?").execute(arguments: [domainID, path])
        try db.cachedStatement(sql: "DELETE FROM item WHERE domainID = ? AND path >= ? AND path < ?")
            .execute(arguments: [domainID, path + "/", path + "0"])
    }

    /// Gives everything below the folder path `from` the same place below `to` (the folder's
    /// own record is not changed).
    public func renameSubtree(domainID: Int64, from: String, to: String) throws(FileProviderError) {
        try write { db in
            try db.cachedStatement(sql: "UPDATE item SET path = ? || substr(path, ?) WHERE domainID = ? AND path >= ? AND path < ?")
                .execute(arguments: [to, from.unicodeScalars.count + 1, domainID, from + "/", from + "0"])  // substr counts code points
        }
    }

    /// The unfinished journal entry of an operation on a path, if any.
    public func unfinishedOperation(domainID: Int64, templateIdentifier: String) throws(FileProviderError) -> JournalEntry? {
        try read { db in
            try JournalEntry.fetchOne(db.cachedStatement(sql: Self.selectUnfinishedByTemplate), arguments: [domainID, templateIdentifier])
        }
    }
}
