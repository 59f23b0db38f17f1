import Foundation
import GRDB
import ProviderCore

/// A local item excluded from sync: the domain's store cannot take it (a kind it cannot create,
/// a file over its size limit), so it stays in the replica and is not sent until it changes
/// into something the store can take (Apple's `NSFileProviderError.Code.excludedFromSync`).
public struct ExcludedItemRecord: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "excludedItem"
    public var domainID: Int64
    /// The item's path in the replica (relative to its root).
    public var path: String
    /// `file`, `folder` or `symlink`.
    public var kind: String
    /// The file's size when it was excluded (0 for folders and symlinks).
    public var size: Int64
    /// Why, for people; the user was told this once, when it was recorded.
    public var reason: String
    /// When the item was first excluded for this reason.
    public var since: Date
    /// The store refused it (`notSupported`, `invalidFilename`) where the engine could not
    /// foresee it: it is not sent again while the file is as it was then (``modificationNanos``,
    /// ``inode``, ``size``; a folder while it is a folder).
    public var refusedByStore: Bool
    /// The file's modification time (ns since 1970) when the store refused it.
    public var modificationNanos: Int64?
    /// The file's inode when the store refused it.
    public var inode: Int64?

    public init(
        domainID: Int64, path: String, kind: String, size: Int64, reason: String, since: Date = Date(), refusedByStore: Bool = false,
        modificationNanos: Int64? = nil, inode: Int64? = nil
    ) {
        self.domainID = domainID
        self.path = path
        self.kind = kind
        self.size = size
        self.reason = reason
        self.since = since
        self.refusedByStore = refusedByStore
        self.modificationNanos = modificationNanos
        self.inode = inode
    }
}

extension MetadataStore {
    /// The items of a domain excluded from sync, by path.
    /// - Throws: `localIOFailure` when the database fails.
    public func excludedItems(domainID: Int64) throws(FileProviderError) -> [ExcludedItemRecord] {
        try read { db in
            try ExcludedItemRecord.filter(Column("domainID") == domainID).order(Column("path")).fetchAll(db)
        }
    }

    /// Records items excluded from sync (replacing what was recorded at their paths) and forgets
    /// the exclusions at `removing`, in one transaction.
    /// - Throws: `localIOFailure` when the database fails.
    public func updateExcludedItems(domainID: Int64, saving records: [ExcludedItemRecord], removing paths: [String])
        throws(FileProviderError)
    {
        if records.isEmpty && paths.isEmpty { return }
        try write { db in
            for path in paths {
                try db.cachedStatement(sql: "DELETE FROM excludedItem WHERE domainID = ? AND path = ?").execute(arguments: [domainID, path])
            }
            for record in records { try record.save(db) }
        }
    }
}
