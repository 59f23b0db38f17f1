import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// `comparison` is ">=" for a part's first page (from ""), ">" after a key.
    private static func selectOutdated(_ comparison: String) -> String {
        """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_materialized
        WHERE domainID = ? AND state = 'materialized' AND identifier \(comparison) ? AND kind = 'file'
        AND (localContentVersion IS NULL OR localContentVersion <> contentVersion)
        ORDER BY identifier LIMIT ?
        """
    }
    private static func selectPinnedPlaceholders(_ comparison: String) -> String {
        """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_policy
        WHERE domainID = ? AND contentPolicy = 'eager' AND state = 'placeholder' AND kind = 'file' AND identifier \(comparison) ?
        ORDER BY identifier LIMIT ?
        """
    }
    // Pinned placeholders are read by the part before: not again here.
    private static let selectPlaceholdersBelowAfter = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_path
        WHERE domainID = ? AND path > ? AND path < ? AND state = 'placeholder' AND kind = 'file'
        AND (contentPolicy IS NULL OR contentPolicy <> 'eager')
        ORDER BY path LIMIT ?
        """

    /// Files a sync owes the replica: materialized files whose contents are outdated (or of an
    /// unknown version), and placeholders that are pinned or below a pinned folder. A sync that
    /// ended between recording new versions and downloading them (killed, or a download that
    /// failed) leaves such rows; the next sync finds them here.
    ///
    /// Every such row of the domain at once: sync reads them in pages
    /// (``dueDownloads(domainID:after:limit:)``).
    /// - Throws: `localIOFailure` when the database fails.
    public func dueDownloads(domainID: Int64) throws(FileProviderError) -> [ItemRecord] {
        var records: [ItemRecord] = []
        var cursor: DueDownloadsCursor?
        repeat {
            let page = try dueDownloads(domainID: domainID, after: cursor, limit: 4_096)
            records += page.records
            cursor = page.next
        } while cursor != nil
        return records
    }

    /// At most `limit` of the files ``dueDownloads(domainID:)`` gives, from where `cursor` left
    /// off (from the first with `nil`), each page read in its own transaction, and where the
    /// next page starts (`nil` after the last). The outdated downloaded files come first, by
    /// identifier; then the pinned placeholders, by identifier; then the placeholders below each
    /// pinned folder not below another one, by path. Each part goes on after the last key it
    /// gave, so downloading a page (which changes the rows' states) neither skips a row of the
    /// next pages nor gives one twice; a row is in one part only. The pinned folders are read
    /// once, when the pinned placeholders are done, and kept in the cursor.
    /// - Throws: `localIOFailure` when the database fails.
    public func dueDownloads(domainID: Int64, after cursor: DueDownloadsCursor?, limit: Int) throws(FileProviderError)
        -> (records: [ItemRecord], next: DueDownloadsCursor?)
    {
        let limit = max(1, limit)
        return try read { db in
            var records: [ItemRecord] = []
            var cursor: DueDownloadsCursor? = cursor ?? DueDownloadsCursor(part: .outdated, key: nil, folders: [])
            while let current = cursor, records.count < limit {
                let wanted = limit - records.count
                // Without a key a part starts at "" (every text is >= ""; "> ''" would skip an
                // empty identifier).
                let key = current.key ?? ""
                let rows: RowCursor
                switch current.part {
                case .outdated, .pinned:
                    let comparison = current.key == nil ? ">=" : ">"
                    let sql = current.part == .outdated ? Self.selectOutdated(comparison) : Self.selectPinnedPlaceholders(comparison)
                    rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: [domainID, key, wanted])
                case .below(let index):
                    // Every path that starts with "folder/": "/" is 0x2F, the next byte is "0".
                    let folder = current.folders[index]
                    rows = try Row.fetchCursor(
                        db.cachedStatement(sql: Self.selectPlaceholdersBelowAfter),
                        arguments: [domainID, current.key ?? folder + "/", folder + "0", wanted])
                }
                var (fetched, last) = (0, current.key)
                while let row = try rows.next() {
                    fetched += 1
                    let record = ItemRecord(row: row)
                    let recordKey = current.part.byPath ? record.path : record.identifier.rawValue
                    // A text read back ends at its first NUL: a row stored with one (no store
                    // should make one) reads back as a key already given. Left out, not given twice.
                    if let last, !last.utf8.lexicographicallyPrecedes(recordKey.utf8) { continue }
                    records.append(record)
                    last = recordKey
                }
                if fetched < wanted {
                    cursor = try Self.part(after: current, domainID: domainID, in: db)
                } else if let last, last != current.key {
                    cursor = DueDownloadsCursor(part: current.part, key: last, folders: current.folders)
                } else {
                    // A whole page of such rows: skip the texts that start with the key and NUL
                    // (the next text after them starts with the key and 0x01).
                    cursor = DueDownloadsCursor(part: current.part, key: (current.key ?? "") + "\u{1}", folders: current.folders)
                }
            }
            return (records, cursor)
        }
    }

    /// Where the part after `cursor`'s starts; `nil` after the last.
    private static func part(after cursor: DueDownloadsCursor, domainID: Int64, in db: Database) throws -> DueDownloadsCursor? {
        switch cursor.part {
        case .outdated:
            return DueDownloadsCursor(part: .pinned, key: nil, folders: [])
        case .pinned:
            let folders = try outermostPinnedFolders(domainID: domainID, in: db)
            return folders.isEmpty ? nil : DueDownloadsCursor(part: .below(0), key: nil, folders: folders)
        case .below(let index):
            return index + 1 < cursor.folders.count ? DueDownloadsCursor(part: .below(index + 1), key: nil, folders: cursor.folders) : nil
        }
    }

    /// The domain's pinned folders (the root left out: nothing is below "/"), without those below
    /// another pinned folder: a placeholder below two of them is read once.
    private static func outermostPinnedFolders(domainID: Int64, in db: Database) throws -> [String] {
        let paths = try String.fetchAll(
            db.cachedStatement(
                sql: "SELECT path FROM item INDEXED BY item_policy WHERE domainID = ? AND contentPolicy = 'eager' AND kind = 'folder'"),
            arguments: [domainID])
        let pinned = Set(paths)
        return paths.filter { path in
            guard !path.isEmpty else { return false }
            var ancestor = Substring(path)
            while let slash = ancestor.lastIndex(of: "/") {
                ancestor = ancestor[..<slash]
                if pinned.contains(String(ancestor)) { return false }
            }
            return true
        }
        .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}

/// Where a paged read of due downloads (``MetadataStore/dueDownloads(domainID:after:limit:)``)
/// goes on.
public struct DueDownloadsCursor: Hashable, Sendable {
    enum Part: Hashable, Sendable {
        /// Downloaded files whose contents are outdated, by identifier.
        case outdated
        /// Pinned placeholders, by identifier.
        case pinned
        /// Placeholders below `folders[index]`, by path.
        case below(Int)

        var byPath: Bool { if case .below = self { true } else { false } }
    }
    var part: Part
    /// The last identifier (or path) the part gave; `nil` at its start.
    var key: String?
    /// The pinned folders not below another one, read when the pinned placeholders are done.
    var folders: [String]
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
            try Self.dropEarlierPlacedDownloads(domainID: domainID, downloads.lazy.map { ($0.identifier, $0.inode) }, in: db)
        }
    }
}
