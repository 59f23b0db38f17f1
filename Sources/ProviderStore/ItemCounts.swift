import CSQLiteConfig
import GRDB
import GRDBSQLite
import ProviderCore

/// A domain's counters by content state (table `itemCount`, ``Migrations`` v9), for writes that
/// run with the triggers off and count a batch at once instead of a trigger program per row.
/// The root (path "") is never counted, as the triggers leave it out.
struct ItemCounts {
    struct Counts: Equatable {
        var items = 0
        var pinned = 0
        var bytes: Int64 = 0
        var datalessFolders = 0
    }

    private(set) var byState: [String: Counts] = [:]

    /// What `records` add to the counters.
    init(_ records: [ItemRecord]) {
        for index in records.indices where !records[index].path.isEmpty {
            let record = records[index]
            count(
                state: record.state.rawValue, pinned: record.contentPolicy == .eager,
                bytes: record.state == .materialized ? record.size : 0, dataless: record.isDataless)
        }
    }

    /// What the rows of `identifiers` count for now (rows that are not there count for nothing),
    /// read ``MetadataStore/materializedChunk`` identifiers per statement.
    /// - Throws: `DatabaseError` when the database fails.
    init(rowsOf identifiers: [ItemIdentifier], domainID: Int64, in db: Database) throws {
        var start = identifiers.startIndex
        while start < identifiers.endIndex {
            let end = min(start + MetadataStore.materializedChunk, identifiers.endIndex)
            let marks = Array(repeating: "?", count: end - start).joined(separator: ",")
            let statement = try db.cachedStatement(
                sql: """
                    SELECT state, contentPolicy IS 'eager', CASE WHEN state = 'materialized' THEN size ELSE 0 END, isDataless
                    FROM item WHERE domainID = ? AND path <> '' AND identifier IN (\(marks))
                    """)
            var values: [(any DatabaseValueConvertible)?] = [domainID]
            values.reserveCapacity(end - start + 1)
            for identifier in identifiers[start..<end] { values.append(identifier.rawValue) }
            let rows = try Row.fetchCursor(statement, arguments: StatementArguments(values))
            while let row = try rows.next() {
                count(state: row[0], pinned: row[1], bytes: row[2], dataless: row[3])
            }
            start = end
        }
    }

    private mutating func count(state: String, pinned: Bool, bytes: Int64, dataless: Bool) {
        var counts = byState[state, default: Counts()]
        counts.items += 1
        if pinned { counts.pinned += 1 }
        // Sizes come from the store: added without overflow, as SQLite's own sum would not.
        counts.bytes &+= bytes
        if dataless { counts.datalessFolders += 1 }
        byState[state] = counts
    }

    /// The difference from `earlier` to these counts, state by state.
    func subtracting(_ earlier: ItemCounts) -> ItemCounts {
        var difference = ItemCounts([])
        for state in Set(byState.keys).union(earlier.byState.keys) {
            let now = byState[state, default: Counts()]
            let then = earlier.byState[state, default: Counts()]
            let delta = Counts(
                items: now.items - then.items, pinned: now.pinned - then.pinned, bytes: now.bytes &- then.bytes,
                datalessFolders: now.datalessFolders - then.datalessFolders)
            if delta != Counts() { difference.byState[state] = delta }
        }
        return difference
    }

    /// Adds these counts to the domain's counters, inside a write transaction.
    /// - Throws: `DatabaseError` when the database fails.
    func add(domainID: Int64, in db: Database) throws {
        if byState.isEmpty { return }
        let add = try db.cachedStatement(
            sql: """
                INSERT INTO itemCount (domainID, state, items, pinned, bytes, datalessFolders)
                    SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM domain WHERE id = ?1)
                    ON CONFLICT (domainID, state) DO UPDATE SET items = items + excluded.items,
                        pinned = pinned + excluded.pinned, bytes = bytes + excluded.bytes,
                        datalessFolders = datalessFolders + excluded.datalessFolders
                """)
        for (state, counts) in byState {
            try add.execute(arguments: [domainID, state, counts.items, counts.pinned, counts.bytes, counts.datalessFolders])
        }
    }

    /// Runs `body` with the triggers of `db`'s connection off, and turns them on again however
    /// it ends. Statements prepared meanwhile have no trigger programs; SQLite prepares every
    /// statement again when the setting changes, so none keeps it.
    /// - Throws: what `body` throws; `DatabaseError` when SQLite refuses the setting.
    static func withoutTriggers<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        let connection = db.sqliteConnection
        let off = fp_sqlite_enable_triggers(connection, 0)
        guard off == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: off), message: "cannot turn triggers off") }
        defer { _ = fp_sqlite_enable_triggers(connection, 1) }
        return try body()
    }
}
