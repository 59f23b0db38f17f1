import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// Adds a domain and returns it with its id.
    /// - Throws: `filenameCollision` when a domain of that name exists.
    public func insertDomain(_ record: DomainRecord) throws(FileProviderError) -> DomainRecord {
        var record = record
        do {
            try pool.write { db in try record.insert(db) }
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw FileProviderError(.filenameCollision, "a domain named '\(record.name)' exists already")
        } catch {
            throw wrap(error)
        }
        return record
    }

    /// The domain of that name, or `nil`.
    public func domain(named name: String) throws(FileProviderError) -> DomainRecord? {
        try read { db in try DomainRecord.filter(DomainRecord.Columns.name == name).fetchOne(db) }
    }

    /// Every domain, by name.
    public func domains() throws(FileProviderError) -> [DomainRecord] {
        try read { db in try DomainRecord.order(DomainRecord.Columns.name).fetchAll(db) }
    }

    /// Saves changed fields of a domain.
    public func updateDomain(_ record: DomainRecord) throws(FileProviderError) {
        try write { db in try record.update(db) }
    }

    /// Deletes a domain with its items, anchors, journal, checkpoints and thumbnails.
    public func deleteDomain(id: Int64) throws(FileProviderError) {
        try write { db in _ = try DomainRecord.deleteOne(db, key: id) }
    }
}
