import Foundation
import GRDB
import ProviderCore

/// A `domain` row read and written column by column instead of through `Codable`: every
/// command reads the domains when it starts, and `Codable`'s first use in a process (its keyed
/// containers, the metadata of each property's type) and GRDB's dates (a UTC `Calendar` to read,
/// a `DateFormatter` to write, each made on first use) cost about 2 ms of each command's
/// start-up, a few percent of a first sync's two commands (Docs/Performance.md).
extension DomainRecord {
    /// The table's columns, in the order of ``values``.
    static let columns = [
        "id", "name", "backendKind", "configuration", "replicaPath", "createdAt", "isConnected", "lastSyncAt", "lastError",
        "ignorePatterns", "failureCount", "nextRetryAt", "replicaMode", "hydration", "cacheBudget", "onAccess", "onAccessReason",
        "modeReason",
    ]
    static let selectAll = "SELECT \(columns.joined(separator: ", ")) FROM domain"
    /// The insert of a row's ``values``.
    static let insert =
        "INSERT INTO domain (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))"

    /// Decodes a row of ``selectAll`` (or `SELECT *`), by column name.
    /// - Throws: `localIOFailure` for a replica mode, hydration or on-access mechanism this version does not
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
        replicaMode = try Self.known(row, "replicaMode", "replica mode")
        hydration = try Self.known(row, "hydration", "hydration")
        cacheBudget = try row.decode(forColumn: "cacheBudget")
        onAccess = try Self.known(row, "onAccess", "on-access mechanism")
        onAccessReason = try row.decode(forColumn: "onAccessReason")
        modeReason = try row.decode(forColumn: "modeReason")
    }

    /// The value of `column`, one of `Value`'s raw values.
    /// - Throws: `localIOFailure` for another (a database a newer version wrote: never guessed
    ///   as a known one), GRDB's decoding error for a missing column or a value that is no text.
    private static func known<Value: RawRepresentable<String>>(_ row: Row, _ column: String, _ what: String) throws -> Value {
        let raw: String = try row.decode(forColumn: column)
        guard let value = Value(rawValue: raw) else {
            throw FileProviderError(
                .localIOFailure,
                "unknown \(what) '\(raw)' (written by a newer version of FileProviderKit?); use that version for this database")
        }
        return value
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
