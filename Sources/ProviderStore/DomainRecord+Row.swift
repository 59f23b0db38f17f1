import Foundation
import GRDB
import ProviderCore

/// A `domain` row read and written column by column instead of through `Codable`: every
/// command reads the domains when it starts, and `Codable`'s first use in a process (its keyed
/// containers, the metadata of each property's type) and GRDB's dates (a UTC `Calendar` to read,
/// a `DateFormatter` to write, each made on first use) cost about 2 ms of each command's
/// start-up, a few percent of a first sync's two commands (Docs/Performance.md).
extension DomainRecord {
    /// The table's columns, in the order ``insertSQL`` binds them.
    static let columns = [
        "id", "name", "backendKind", "configuration", "replicaPath", "createdAt", "isConnected", "lastSyncAt", "lastError",
        "ignorePatterns", "failureCount", "nextRetryAt", "replicaMode", "hydration", "cacheBudget", "onAccess", "onAccessReason",
        "modeReason",
    ]
    static let selectAll = "SELECT \(columns.joined(separator: ", ")) FROM domain"

    /// Decodes a row of ``selectAll`` (or `SELECT *`), by column name.
    /// - Throws: `localIOFailure` for a replica mode or on-access mechanism this version does not
    ///   know (a database a newer version wrote: never guessed as another), GRDB's decoding
    ///   error for a missing column or a value of the wrong type.
    public init(row: Row) throws {
        id = try row.decode(forColumn: "id")
        name = try row.decode(forColumn: "name")
        backendKind = try row.decode(forColumn: "backendKind")
        configuration = try row.decode(forColumn: "configuration")
        replicaPath = try row.decode(forColumn: "replicaPath")
        createdAt = try StoredDate.decode(row, "createdAt")
        isConnected = try row.decode(forColumn: "isConnected")
        lastSyncAt = try StoredDate.decodeIfPresent(row, "lastSyncAt")
        lastError = try row.decode(forColumn: "lastError")
        ignorePatterns = try row.decode(forColumn: "ignorePatterns")
        failureCount = try row.decode(forColumn: "failureCount")
        nextRetryAt = try StoredDate.decodeIfPresent(row, "nextRetryAt")
        let mode: String = try row.decode(forColumn: "replicaMode")
        guard let replicaMode = ReplicaMode(rawValue: mode) else {
            throw FileProviderError(
                .localIOFailure,
                "unknown replica mode '\(mode)' (written by a newer version of FileProviderKit?); use that version for this database")
        }
        self.replicaMode = replicaMode
        let hydration: String = try row.decode(forColumn: "hydration")
        guard let known = Hydration(rawValue: hydration) else {
            throw FileProviderError(
                .localIOFailure,
                "unknown hydration '\(hydration)' (written by a newer version of FileProviderKit?); use that version for this database")
        }
        self.hydration = known
        cacheBudget = try row.decode(forColumn: "cacheBudget")
        let mechanism: String = try row.decode(forColumn: "onAccess")
        guard let onAccess = OnAccessMechanism(rawValue: mechanism) else {
            throw FileProviderError(
                .localIOFailure,
                "unknown on-access mechanism '\(mechanism)' (written by a newer version of FileProviderKit?); use that version for this database"
            )
        }
        self.onAccess = onAccess
        onAccessReason = try row.decode(forColumn: "onAccessReason")
        modeReason = try row.decode(forColumn: "modeReason")
    }

    /// The row's values, dates as GRDB's text (``StoredDate``).
    public func encode(to container: inout PersistenceContainer) {
        for (column, value) in zip(Self.columns, values) { container[column] = value }
    }

    /// The values of ``columns``, in order.
    var values: [(any DatabaseValueConvertible)?] {
        [
            id, name, backendKind, configuration, replicaPath, StoredDate.value(createdAt), isConnected, StoredDate.value(lastSyncAt),
            lastError, ignorePatterns, failureCount, StoredDate.value(nextRetryAt), replicaMode.rawValue, hydration.rawValue,
            cacheBudget, onAccess.rawValue, onAccessReason, modeReason,
        ]
    }
}
