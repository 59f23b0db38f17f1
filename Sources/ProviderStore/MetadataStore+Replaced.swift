import Foundation
import GRDB
import ProviderCore

/// Items the store replaced by a new one of the same name (deleted and made again: a new
/// identifier at the same path), whose records sync down re-keyed to the new identifier.
extension MetadataStore {
    /// Gives the children of the folder `old` the parent `new`: the store replaced the folder by
    /// a new one of the same name, and what the database had below the old one is compared with
    /// the new one's listing.
    /// - Throws: `localIOFailure` when the database fails.
    public func reparentChildren(domainID: Int64, from old: ItemIdentifier, to new: ItemIdentifier) throws(FileProviderError) {
        try write { db in
            try db.cachedStatement(sql: "UPDATE item SET parentIdentifier = ? WHERE domainID = ? AND parentIdentifier = ?")
                .execute(arguments: [new.rawValue, domainID, old.rawValue])
        }
    }

    /// Forgets what the database kept by identifier of items whose records were re-keyed (the
    /// ranges present of a partly downloaded file, when it was last used), unless an item of
    /// the domain has that identifier again.
    /// - Throws: `localIOFailure` when the database fails.
    public func forgetReplaced(domainID: Int64, identifiers: [ItemIdentifier]) throws(FileProviderError) {
        if identifiers.isEmpty { return }
        try write { db in
            for table in ["presentRange", "itemUse"] {
                let statement = try db.cachedStatement(
                    sql: """
                        DELETE FROM \(table) WHERE domainID = ?1 AND identifier = ?2
                        AND NOT EXISTS (SELECT 1 FROM item WHERE domainID = ?1 AND identifier = ?2)
                        """)
                for identifier in identifiers { try statement.execute(arguments: [domainID, identifier.rawValue]) }
            }
        }
    }
}
