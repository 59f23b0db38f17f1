import Foundation
import GRDB
import ProviderCore

/// Uploads no listing has confirmed yet (`unconfirmedUpload`, migration v16): the files this
/// engine created or changed in the store, with the content version the store answered. A
/// store that took an upload and then lists the item gone, or at another version, did not keep
/// it: sync down keeps the local bytes instead of removing them or downloading over them. A row
/// goes once a listing or the change feed shows the item.
extension MetadataStore {
    /// An upload of `identifier` no listing has confirmed: the content version the store
    /// answered.
    public struct UnconfirmedUpload: Sendable, Equatable {
        public var contentVersion: Data
    }

    /// Notes uploads the store answered (files only), in the caller's transaction.
    static func noteUnconfirmed(_ records: [ItemRecord], now: Date, in db: Database) throws {
        // Bound through SQLite's calls (``ParameterBinder``): a row per uploaded file.
        var insert = ParameterBinder(
            try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO unconfirmedUpload (domainID, identifier, contentVersion, createdAt) VALUES (?, ?, ?, ?)"),
            reserving: 0)
        for record in records where record.kind == .file {
            // Contents the store changed on its side (shouldFetchContent) are downloaded again.
            guard let version = record.localContentVersion, !version.isEmpty else { continue }
            insert.reserve(record.identifier.rawValue.utf8.count + version.count)
            insert.bind(record.domainID)
            insert.bind(record.identifier.rawValue)
            insert.bind(version)
            insert.bind(now.timeIntervalSince1970)
            try insert.execute(in: db)
        }
    }

    /// The unconfirmed upload of an item, `nil` when there is none.
    /// - Throws: `localIOFailure` when the database fails.
    public func unconfirmedUpload(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) -> UnconfirmedUpload? {
        try read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT contentVersion FROM unconfirmedUpload WHERE domainID = ? AND identifier = ?"),
                arguments: [domainID, identifier.rawValue]
            ).map { UnconfirmedUpload(contentVersion: $0[0]) }
        }
    }

    /// Forgets the unconfirmed uploads of items a change feed showed (after sync down placed
    /// them, so a version the store did not keep was already seen).
    /// - Throws: `localIOFailure` when the database fails.
    public func confirmUploads(domainID: Int64, _ identifiers: [ItemIdentifier]) throws(FileProviderError) {
        if identifiers.isEmpty { return }
        try write { db in
            var delete = ParameterBinder(
                try db.cachedStatement(sql: "DELETE FROM unconfirmedUpload WHERE domainID = ? AND identifier = ?"), reserving: 0)
            for identifier in identifiers {
                delete.reserve(identifier.rawValue.utf8.count)
                delete.bind(domainID)
                delete.bind(identifier.rawValue)
                try delete.execute(in: db)
            }
        }
    }

    /// Forgets the unconfirmed uploads noted before `date`: a walk of the whole store that
    /// began after them listed every item, and settled those it did not find as they were.
    /// - Throws: `localIOFailure` when the database fails.
    public func confirmUploads(domainID: Int64, notedBefore date: Date) throws(FileProviderError) {
        try write { db in
            try db.execute(
                sql: "DELETE FROM unconfirmedUpload WHERE domainID = ? AND createdAt < ?",
                arguments: [domainID, date.timeIntervalSince1970])
        }
    }
}
