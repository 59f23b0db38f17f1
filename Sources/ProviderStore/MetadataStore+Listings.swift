import Foundation
import GRDB
import ProviderCore

/// A digest of one folder's store listing, as sync down applied it in full (``Migrations`` v13).
public struct FolderListing: Sendable, Equatable {
    public var identifier: ItemIdentifier
    public var digest: Data

    public init(identifier: ItemIdentifier, digest: Data) {
        self.identifier = identifier
        self.digest = digest
    }
}

/// The rows sync down compares a folder's listing with, or only its subfolders when the folder
/// was listed the same way before and none of its rows changed since.
public struct StoredFolder: Sendable {
    /// Whether the digest given matched the folder's: its rows are what that listing made them.
    public var isUnchanged: Bool
    /// The folder's children, or only its subfolders when ``isUnchanged``; by name.
    public var children: [ItemRecord]
}

/// Folder listings: what lets a walk of an unchanged store skip reading and comparing a million
/// rows. A digest is kept per folder and dropped by triggers whenever a row in the folder (or
/// the folder's own row) is written, so a digest that matches says the rows are exactly what
/// the listing it describes made them.
extension MetadataStore {
    private static let selectListing = "SELECT digest FROM folderListing WHERE domainID = ? AND identifier = ?"
    private static let selectSubfolders = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_subfolder \
        WHERE domainID = ? AND parentIdentifier = ? AND kind = 'folder' AND path <> '' ORDER BY filename
        """
    private static let insertListing = "INSERT OR REPLACE INTO folderListing (domainID, identifier, digest) VALUES (?, ?, ?)"
    private static let dropListing = "DELETE FROM folderListing WHERE domainID = ? AND identifier = ?"

    /// What the database has of the folder `parent`, read in one transaction: when its kept
    /// digest is `digest`, only its subfolders (``StoredFolder/isUnchanged``); otherwise all its
    /// children, as ``children(domainID:parent:)``.
    /// - Throws: `localIOFailure` when the database fails.
    public func storedFolder(domainID: Int64, parent: ItemIdentifier, digest: Data?) throws(FileProviderError) -> StoredFolder {
        try read { db in
            if let digest,
                let kept = try Data.fetchOne(db.cachedStatement(sql: Self.selectListing), arguments: [domainID, parent.rawValue]),
                kept == digest
            {
                let subfolders = try Row.fetchCursor(
                    db.cachedStatement(sql: Self.selectSubfolders), arguments: [domainID, parent.rawValue]
                ).map(ItemRecord.init(row:)).reduce(into: []) { $0.append($1) }
                return StoredFolder(isUnchanged: true, children: subfolders)
            }
            return StoredFolder(isUnchanged: false, children: try Self.children(domainID: domainID, parent: parent, in: db))
        }
    }

    /// The digest kept for a folder, or `nil` (tests).
    /// - Throws: `localIOFailure` when the database fails.
    public func listingDigest(domainID: Int64, folder: ItemIdentifier) throws(FileProviderError) -> Data? {
        try read { db in
            try Data.fetchOne(db.cachedStatement(sql: Self.selectListing), arguments: [domainID, folder.rawValue])
        }
    }

    /// Keeps folder digests, inside a write transaction that already wrote the rows they
    /// describe (a later write to those rows drops them again).
    static func keep(_ listings: [FolderListing], domainID: Int64, in db: Database) throws {
        if listings.isEmpty { return }
        let insert = try db.cachedStatement(sql: Self.insertListing)
        for listing in listings {
            try insert.execute(arguments: [domainID, listing.identifier.rawValue, listing.digest])
        }
    }

    /// Drops the digests of the folders holding `records`, written with the triggers paused.
    static func dropListings(holding records: [ItemRecord], domainID: Int64, in db: Database) throws {
        let drop = try db.cachedStatement(sql: Self.dropListing)
        var last: ItemIdentifier?
        var dropped = Set<ItemIdentifier>()
        for index in records.indices where records[index].parentIdentifier != last {
            let parent = records[index].parentIdentifier
            last = parent
            if dropped.insert(parent).inserted {
                try drop.execute(arguments: [domainID, parent.rawValue])
            }
        }
    }

    /// Drops the digests of these folders' own listings (a row written with triggers off, as
    /// the update trigger would).
    static func dropOwnListings(of folders: [ItemRecord], domainID: Int64, in db: Database) throws {
        if folders.isEmpty { return }
        let drop = try db.cachedStatement(sql: Self.dropListing)
        for index in folders.indices { try drop.execute(arguments: [domainID, folders[index].identifier.rawValue]) }
    }
}
