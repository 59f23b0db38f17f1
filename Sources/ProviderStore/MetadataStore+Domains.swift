import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// Adds a domain and returns it with its id.
    /// - Throws: `filenameCollision` when a domain of that name exists.
    public func insertDomain(_ record: DomainRecord) throws(FileProviderError) -> DomainRecord {
        var record = record
        do {
            try pool.write { db in
                // Without GRDB's persistence methods, which build the statement at each call.
                try db.execute(sql: DomainRecord.insert, arguments: StatementArguments(record.values))
                record.id = db.lastInsertedRowID
            }
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw FileProviderError(.filenameCollision, "a domain named '\(record.name)' exists already")
        } catch {
            throw wrap(error)
        }
        return record
    }

    /// The domain of that name, or `nil`.
    public func domain(named name: String) throws(FileProviderError) -> DomainRecord? {
        try read { db in try DomainRecord.fetchOne(db.cachedStatement(sql: DomainRecord.selectAll + " WHERE name = ?"), arguments: [name]) }
    }

    /// Every domain, by name.
    public func domains() throws(FileProviderError) -> [DomainRecord] {
        try read { db in try DomainRecord.fetchAll(db.cachedStatement(sql: DomainRecord.selectAll + " ORDER BY name")) }
    }

    /// Saves changed fields of a domain.
    public func updateDomain(_ record: DomainRecord) throws(FileProviderError) {
        try write { db in try record.update(db) }
    }

    /// Sets a domain's replica mode (after its files were converted to the mode's layout) and
    /// why (``DomainRecord/modeReason``), and nothing else of the domain: a sync recording its
    /// outcome at the same time keeps it.
    /// - Throws: `providerDomainNotFound` when no domain has that id; `localIOFailure` when the
    ///   database fails.
    public func setReplicaMode(domainID: Int64, _ mode: ReplicaMode, reason: String? = nil) throws(FileProviderError) {
        let changed = try write { db in
            try db.execute(
                sql: "UPDATE domain SET replicaMode = ?, modeReason = ? WHERE id = ?", arguments: [mode.rawValue, reason, domainID])
            return db.changesCount
        }
        if changed == 0 { throw FileProviderError(.providerDomainNotFound, "no domain with id \(domainID)") }
    }

    /// Sets how programs reach a dataless domain's files (``DomainRecord/onAccess``) and why
    /// (``DomainRecord/onAccessReason``), and nothing else of the domain.
    /// - Throws: as ``setReplicaMode(domainID:_:)``.
    public func setOnAccess(domainID: Int64, _ mechanism: OnAccessMechanism, reason: String?) throws(FileProviderError) {
        let changed = try write { db in
            try db.execute(
                sql: "UPDATE domain SET onAccess = ?, onAccessReason = ? WHERE id = ?",
                arguments: [mechanism.rawValue, reason, domainID])
            return db.changesCount
        }
        if changed == 0 { throw FileProviderError(.providerDomainNotFound, "no domain with id \(domainID)") }
    }

    /// Connects or disconnects a domain (``DomainRecord/isConnected``), and nothing else of it.
    /// - Throws: `providerDomainNotFound` when no domain has that id; `localIOFailure` when the
    ///   database fails.
    public func setConnected(domainID: Int64, _ connected: Bool) throws(FileProviderError) {
        try setColumn("isConnected", to: connected, domainID: domainID)
    }

    /// Sets a domain's backend options (stored as ``DomainRecord/configuration``), and nothing else.
    /// - Throws: as ``setConnected(domainID:_:)``.
    public func setOptions(domainID: Int64, _ options: [String: String]) throws(FileProviderError) {
        let record = DomainRecord(name: "", backendKind: "", configuration: options, replicaPath: "")
        try setColumn("configuration", to: record.configuration, domainID: domainID)
    }

    /// Sets a domain's ignore patterns (one per line), and nothing else.
    /// - Throws: as ``setConnected(domainID:_:)``.
    public func setIgnorePatterns(domainID: Int64, _ patterns: [String]) throws(FileProviderError) {
        try setColumn("ignorePatterns", to: patterns.joined(separator: "\n"), domainID: domainID)
    }

    /// `UPDATE domain SET column = value WHERE id = domainID`; `column` is one of ours, never input.
    private func setColumn(_ column: String, to value: some DatabaseValueConvertible, domainID: Int64) throws(FileProviderError) {
        let changed = try write { db in
            try db.execute(sql: "UPDATE domain SET \(column) = ? WHERE id = ?", arguments: [value, domainID])
            return db.changesCount
        }
        if changed == 0 { throw FileProviderError(.providerDomainNotFound, "no domain with id \(domainID)") }
    }

    /// Deletes a domain with its items, anchors, journal, checkpoints and thumbnails (and
    /// records a killed process left staged for it, which have no foreign key).
    public func deleteDomain(id: Int64) throws(FileProviderError) {
        try write { db in
            _ = try DomainRecord.deleteOne(db, key: id)
            try db.execute(sql: "DELETE FROM itemRekey WHERE domainID = ?", arguments: [id])
        }
    }
}
