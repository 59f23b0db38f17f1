import Foundation
import GRDB
import ProviderCore

/// The engine's downloads in a replica, as they were placed (`placedDownload`, migration v25).
///
/// A download is renamed into place and recorded afterwards, in batches. Between the two, a
/// process killed, or a sync in another process scanning meanwhile, finds a file the item's row
/// does not describe: without a note it would take the download for a local edit and upload it.
/// So the engine notes each download (item, content version, and the size, modification time
/// and inode the file keeps through its rename), a batch in one transaction before it renames
/// the files. A file that matches its item's note is the engine's own download, unchanged
/// since: any edit changes its size or time, a save by rename or a copy its inode. The note
/// stays after the row is written, as long as the file is the item's latest download, because
/// a process holding an older copy of the row must still tell the download from an edit; and
/// a row alone cannot say it: an uploaded file's row describes it just as well, and its bytes
/// may be the only copy. An item keeps the note of the download its row records, and of any
/// placed since; the row's write drops the others, and the item's deletion its notes.
///
/// The note replaces an extended attribute the engine wrote on each file
/// (`user.fileprovider.download`): different on every file, it gave every downloaded file a
/// 4 KiB ext4 attribute block of its own, where the status and the domain's name fit in the
/// inode or share a block between files (Docs/Performance.md, "An attribute block per
/// downloaded file"). Files placed by earlier
/// versions keep theirs and are still recognized by it.
extension MetadataStore {
    /// Notes downloads about to be renamed into place, in one transaction.
    /// - Throws: `localIOFailure` when the database cannot be written.
    public func notePlacedDownloads(domainID: Int64, _ downloads: [PlacedDownload]) throws(FileProviderError) {
        if downloads.isEmpty { return }
        try write { db in
            // 64 rows to a statement, as a batch of downloads has at most 64 files; bound without
            // `StatementArguments` (``ParameterBinder``).
            for start in stride(from: 0, to: downloads.count, by: 64) {
                let part = downloads[start..<min(start + 64, downloads.count)]
                let statement =
                    part.count == 64
                    ? try db.cachedStatement(sql: Self.noteSixtyFour) : try db.cachedStatement(sql: Self.noteSQL(rows: part.count))
                var binder = ParameterBinder(
                    statement,
                    reserving: part.reduce(0) { $0 + $1.identifier.rawValue.utf8.count + ($1.contentVersion?.count ?? 0) })
                for download in part {
                    binder.bind(domainID)
                    binder.bind(download.identifier.rawValue)
                    binder.bind(download.inode)
                    binder.bind(download.size)
                    binder.bind(download.modificationNanos)
                    binder.bind(download.contentVersion)
                }
                try binder.execute(in: db)
            }
        }
    }

    /// The insert of `rows` notes.
    private static func noteSQL(rows: Int) -> String {
        let values = Array(repeating: "(?, ?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
        return
            "INSERT OR REPLACE INTO placedDownload (domainID, identifier, inode, size, modificationNanos, contentVersion) VALUES \(values)"
    }
    private static let noteSixtyFour = noteSQL(rows: 64)

    /// Drops the notes of earlier downloads of items whose rows now record a file (the item's
    /// identifier and the inode its row records), in the caller's transaction: that file's note
    /// stays.
    static func dropEarlierPlacedDownloads(
        domainID: Int64, _ recorded: some Sequence<(identifier: ItemIdentifier, inode: Int64?)>, in db: Database
    ) throws {
        // 64 to a statement: one statement per row was 3% of the CPU of `materialize -R` of
        // 10,000 small files. Bound without `StatementArguments` (``ParameterBinder``).
        var part: [(String, Int64)] = []
        func drop() throws {
            if part.isEmpty { return }
            let statement =
                part.count == 64 ? try db.cachedStatement(sql: dropSixtyFour) : try db.cachedStatement(sql: dropSQL(rows: part.count))
            var binder = ParameterBinder(statement, reserving: 2 * part.reduce(0) { $0 + $1.0.utf8.count })
            binder.bind(domainID)
            for (identifier, _) in part { binder.bind(identifier) }
            for (identifier, inode) in part {
                binder.bind(identifier)
                binder.bind(inode)
            }
            try binder.execute(in: db)
            part.removeAll(keepingCapacity: true)
        }
        for (identifier, inode) in recorded {
            guard let inode else { continue }
            part.append((identifier.rawValue, inode))
            if part.count == 64 { try drop() }
        }
        try drop()
    }

    /// The delete of ``dropEarlierPlacedDownloads(domainID:_:in:)`` for `rows` items.
    private static func dropSQL(rows: Int) -> String {
        let list = Array(repeating: "?", count: rows).joined(separator: ", ")
        let pairs = Array(repeating: "(?, ?)", count: rows).joined(separator: ", ")
        return "DELETE FROM placedDownload WHERE domainID = ? AND identifier IN (\(list)) AND (identifier, inode) NOT IN (VALUES \(pairs))"
    }
    private static let dropSixtyFour = dropSQL(rows: 64)

    /// Forgets the note of a download that was not placed after all (its rename failed).
    /// - Throws: `localIOFailure` when the database cannot be written.
    public func forgetPlacedDownload(domainID: Int64, identifier: ItemIdentifier, inode: Int64) throws(FileProviderError) {
        try write { db in
            try db.cachedStatement(sql: "DELETE FROM placedDownload WHERE domainID = ? AND identifier = ? AND inode = ?")
                .execute(arguments: [domainID, identifier.rawValue, inode])
        }
    }

    /// The engine's download of `identifier` that a file with this size, modification time
    /// and inode is, unchanged since it was placed (its note); `nil` when no note describes the
    /// file. The result's ``PlacedDownload/contentVersion`` is the version the file holds.
    /// - Throws: `localIOFailure` when the database fails.
    public func placedDownload(
        domainID: Int64, identifier: ItemIdentifier, size: Int64, modificationNanos: Int64, inode: Int64
    ) throws(FileProviderError) -> PlacedDownload? {
        try read { db in
            try Self.placedDownload(
                domainID: domainID, identifier: identifier, size: size, modificationNanos: modificationNanos, inode: inode, in: db)
        }
    }

    /// ``placedDownload(domainID:identifier:size:modificationNanos:inode:)`` of the item at
    /// `path` (relative to the replica root), whichever it is.
    /// - Throws: `localIOFailure` when the database fails.
    public func placedDownload(
        domainID: Int64, path: String, size: Int64, modificationNanos: Int64, inode: Int64
    ) throws(FileProviderError) -> PlacedDownload? {
        try read { db in
            guard
                let identifier = try String.fetchOne(
                    db.cachedStatement(sql: "SELECT identifier FROM item INDEXED BY item_path WHERE domainID = ? AND path = ?"),
                    arguments: [domainID, path])
            else { return nil }
            return try Self.placedDownload(
                domainID: domainID, identifier: ItemIdentifier(identifier), size: size, modificationNanos: modificationNanos,
                inode: inode, in: db)
        }
    }

    private static func placedDownload(
        domainID: Int64, identifier: ItemIdentifier, size: Int64, modificationNanos: Int64, inode: Int64, in db: Database
    ) throws -> PlacedDownload? {
        let noted = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT contentVersion FROM placedDownload
                    WHERE domainID = ? AND identifier = ? AND inode = ? AND size = ? AND modificationNanos = ?
                    """),
            arguments: [domainID, identifier.rawValue, inode, size, modificationNanos])
        guard let noted else { return nil }
        let version: Data? = noted[0]
        return PlacedDownload(
            identifier: identifier, contentVersion: version, size: size,
            modificationNanos: modificationNanos, inode: inode)
    }
}
