import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// Records a successful sync of a domain: sets `lastSyncAt`, clears `lastError` and the
    /// backoff (`failureCount` 0, `nextRetryAt` `nil`). Only these columns are written, so a
    /// process holding an older copy of the domain does not undo another's changes.
    /// - Throws: `localIOFailure` when the database fails.
    public func recordDomainSuccess(id: Int64, at date: Date = Date()) throws(FileProviderError) {
        try write { db in
            try db.execute(
                sql: "UPDATE domain SET lastSyncAt = ?, lastError = NULL, failureCount = 0, nextRetryAt = NULL WHERE id = ?",
                arguments: [StoredDate.value(date), id])
        }
    }

    /// Records a failed sync of a domain: sets `lastError`. When `nextRetry` is given the failure
    /// backs the domain off: `failureCount` grows by one and `nextRetryAt` becomes
    /// `nextRetry(failureCount)` (the new count). Read and write happen in one transaction, so
    /// two processes failing at once count two failures.
    /// - Returns: the domain as saved, or `nil` when it no longer exists.
    /// - Throws: `localIOFailure` when the database fails.
    @discardableResult
    public func recordDomainFailure(id: Int64, message: String, nextRetry: ((Int) -> Date)?) throws(FileProviderError)
        -> DomainRecord?
    {
        try write { db in
            guard var record = try DomainRecord.fetchOne(db.cachedStatement(sql: DomainRecord.selectAll + " WHERE id = ?"), arguments: [id])
            else { return nil }
            record.lastError = message
            if let nextRetry {
                record.failureCount += 1
                record.nextRetryAt = nextRetry(record.failureCount)
            }
            try db.execute(
                sql: "UPDATE domain SET lastError = ?, failureCount = ?, nextRetryAt = ? WHERE id = ?",
                arguments: [record.lastError, record.failureCount, StoredDate.value(record.nextRetryAt), id])
            return record
        }
    }

    /// The domain with that id, or `nil`.
    /// - Throws: `localIOFailure` when the database fails.
    public func domain(id: Int64) throws(FileProviderError) -> DomainRecord? {
        try read { db in try DomainRecord.fetchOne(db.cachedStatement(sql: DomainRecord.selectAll + " WHERE id = ?"), arguments: [id]) }
    }
}
