import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    private static let selectOutdated = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_materialized
        WHERE domainID = ? AND state = 'materialized' AND (localContentVersion IS NULL OR localContentVersion <> contentVersion)
        """
    private static let selectPinnedPlaceholders = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_policy
        WHERE domainID = ? AND contentPolicy = 'eager' AND state = 'placeholder' AND kind = 'file'
        """
    private static let selectPlaceholdersBelow = """
        SELECT \(ItemRecord.columnList) FROM item
        WHERE domainID = ? AND path >= ? AND path < ? AND state = 'placeholder' AND kind = 'file'
        """

    /// Files a sync owes the replica: materialized files whose contents are outdated (or of an
    /// unknown version), and placeholders that are pinned or below a pinned folder. A sync that
    /// ended between recording new versions and downloading them (killed, or a download that
    /// failed) leaves such rows; the next sync finds them here.
    public func dueDownloads(domainID: Int64) throws(FileProviderError) -> [ItemRecord] {
        let folders = try pinnedFolderPaths(domainID: domainID)
        return try read { db in
            var records = try Row.fetchCursor(db.cachedStatement(sql: Self.selectOutdated), arguments: [domainID])
                .map(ItemRecord.init(row:)).reduce(into: [ItemRecord]()) { $0.append($1) }
            try Row.fetchCursor(db.cachedStatement(sql: Self.selectPinnedPlaceholders), arguments: [domainID])
                .forEach { records.append(ItemRecord(row: $0)) }
            // Every path that starts with "folder/": "/" is 0x2F, the next byte is "0".
            for folder in folders {
                try Row.fetchCursor(
                    db.cachedStatement(sql: Self.selectPlaceholdersBelow), arguments: [domainID, folder + "/", folder + "0"]
                )
                .forEach { records.append(ItemRecord(row: $0)) }
            }
            return records
        }
    }
}

/// A download found in the replica that its process placed but did not record.
public struct PlacedDownload: Hashable, Sendable {
    public var identifier: ItemIdentifier
    /// The content version the file holds; `nil` when unknown (downloaded again by the next sync).
    public var contentVersion: Data?
    /// Size, modification time (ns) and inode of the file.
    public var size: Int64
    public var modificationNanos: Int64
    public var inode: Int64

    public init(identifier: ItemIdentifier, contentVersion: Data?, size: Int64, modificationNanos: Int64, inode: Int64) {
        self.identifier = identifier
        self.contentVersion = contentVersion
        self.size = size
        self.modificationNanos = modificationNanos
        self.inode = inode
    }
}

extension MetadataStore {
    private static let recordPlaced = """
        UPDATE item SET state = 'materialized', localContentVersion = ?, localSize = ?, localModificationNanos = ?, localInode = ?
        WHERE domainID = ? AND identifier = ? AND kind = 'file'
        """

    /// Records files as materialized with the given fingerprints, in one transaction, touching
    /// nothing else of their rows: another process may be writing the same items' metadata or
    /// pins meanwhile. An item no longer in the database is skipped.
    /// - Throws: `localIOFailure` when the database cannot be written.
    public func recordPlacedDownloads(domainID: Int64, _ downloads: [PlacedDownload]) throws(FileProviderError) {
        if downloads.isEmpty { return }
        try write { db in
            let statement = try db.cachedStatement(sql: Self.recordPlaced)
            for download in downloads {
                try statement.execute(arguments: [
                    download.contentVersion, download.size, download.modificationNanos, download.inode, domainID,
                    download.identifier.rawValue,
                ])
            }
        }
    }
}
