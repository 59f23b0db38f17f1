import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// The last anchor of a container's change feed, or `nil`.
    public func syncAnchor(domainID: Int64, container: ItemIdentifier) throws(FileProviderError) -> SyncAnchor? {
        try read { db in
            try SyncAnchorRecord.fetchOne(db, key: ["domainID": domainID, "container": container.rawValue])
                .map { SyncAnchor($0.anchor) }
        }
    }

    /// Stores (or, with `nil`, forgets) a container's anchor.
    public func setSyncAnchor(_ anchor: SyncAnchor?, domainID: Int64, container: ItemIdentifier) throws(FileProviderError) {
        try write { db in
            if let anchor {
                try SyncAnchorRecord(domainID: domainID, container: container.rawValue, anchor: anchor.rawValue, updatedAt: Date())
                    .save(db)
            } else {
                _ = try SyncAnchorRecord.deleteOne(db, key: ["domainID": domainID, "container": container.rawValue])
            }
        }
    }

    /// Writes an operation to the journal before it runs; returns it with its id.
    public func journal(_ entry: JournalEntry) throws(FileProviderError) -> JournalEntry {
        var entry = entry
        try write { db in try entry.insert(db) }
        return entry
    }

    /// Saves a journal entry's new state.
    public func updateJournal(_ entry: JournalEntry) throws(FileProviderError) {
        var entry = entry
        entry.updatedAt = Date()
        try write { db in try entry.update(db) }
    }

    /// The operations of a domain that are not done, oldest first.
    public func unfinishedOperations(domainID: Int64) throws(FileProviderError) -> [JournalEntry] {
        try read { db in
            try JournalEntry.filter(Column("domainID") == domainID && Column("state") != JournalState.done.rawValue)
                .order(Column("id")).fetchAll(db)
        }
    }

    /// Removes the finished operations of a domain.
    public func pruneJournal(domainID: Int64) throws(FileProviderError) {
        try write { db in
            _ = try JournalEntry.filter(Column("domainID") == domainID && Column("state") == JournalState.done.rawValue)
                .deleteAll(db)
        }
    }

    /// The checkpoint of an interrupted download, or `nil`.
    public func checkpoint(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) -> TransferCheckpoint? {
        try read { db in
            try TransferCheckpoint.fetchOne(db, key: ["domainID": domainID, "identifier": identifier.rawValue])
        }
    }

    /// Saves a download's progress.
    public func saveCheckpoint(_ checkpoint: TransferCheckpoint) throws(FileProviderError) {
        try write { db in try checkpoint.save(db) }
    }

    /// Forgets a download's progress.
    public func removeCheckpoint(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) {
        try write { db in
            _ = try TransferCheckpoint.deleteOne(db, key: ["domainID": domainID, "identifier": identifier.rawValue])
        }
    }

    /// A cached thumbnail for that content version and size, or `nil`.
    public func thumbnail(domainID: Int64, identifier: ItemIdentifier, contentVersion: Data, size: Int)
        throws(FileProviderError) -> Data?
    {
        try read { db in
            try ThumbnailRecord.fetchOne(db, key: ["domainID": domainID, "identifier": identifier.rawValue, "size": size])
                .flatMap { $0.contentVersion == contentVersion ? $0.data : nil }
        }
    }

    /// Caches a thumbnail, replacing one of an older content version.
    public func saveThumbnail(_ record: ThumbnailRecord) throws(FileProviderError) {
        try write { db in try record.save(db) }
    }
}

extension MetadataStore {
    /// Every download checkpoint of a domain, by item.
    public func checkpoints(domainID: Int64) throws(FileProviderError) -> [ItemIdentifier: TransferCheckpoint] {
        try read { db in
            let all = try TransferCheckpoint.filter(Column("domainID") == domainID).fetchAll(db)
            return Dictionary(all.map { (ItemIdentifier($0.identifier), $0) }, uniquingKeysWith: { first, _ in first })
        }
    }
}
