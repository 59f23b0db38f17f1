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
        // Counted by state in place first, then keyed by name once: a dictionary keyed by the
        // state's name, read and written per row, was 2% of a first sync's writer thread.
        let states: [ContentState] = [.placeholder, .materialized, .folder, .symlink]
        var tally = [Counts](repeating: Counts(), count: states.count)
        // Through the buffer: `records[index]` would copy each record (its strings retained).
        records.withUnsafeBufferPointer { rows in
            for index in rows.indices where !rows[index].path.isEmpty {
                let state = rows[index].state
                let slot =
                    switch state {
                    case .placeholder: 0
                    case .materialized: 1
                    case .folder: 2
                    case .symlink: 3
                    }
                tally[slot].items += 1
                if rows[index].contentPolicy == .eager { tally[slot].pinned += 1 }
                // Sizes come from the store: added without overflow, as SQLite's own sum would not.
                if state == .materialized { tally[slot].bytes &+= rows[index].size }
                if rows[index].isDataless { tally[slot].datalessFolders += 1 }
            }
        }
        for (slot, state) in states.enumerated() where tally[slot].items > 0 { byState[state.rawValue] = tally[slot] }
    }

    /// What the rows of `identifiers` count for now (rows that are not there count for nothing),
    /// read ``MetadataStore/materializedChunk`` identifiers per statement, bound and read
    /// without GRDB's rows and arguments (this runs once per batch of finished downloads).
    /// - Throws: `DatabaseError` when the database fails.
    init(rowsOf identifiers: [ItemIdentifier], domainID: Int64, in db: Database) throws {
        let arena = BindArena()
        var start = identifiers.startIndex
        while start < identifiers.endIndex {
            let end = min(start + MetadataStore.materializedChunk, identifiers.endIndex)
            let marks = Array(repeating: "?", count: end - start).joined(separator: ",")
            let statement = try db.cachedStatement(
                sql: """
                    SELECT state, contentPolicy IS 'eager', CASE WHEN state = 'materialized' THEN size ELSE 0 END, isDataless
                    FROM item WHERE domainID = ? AND path <> '' AND identifier IN (\(marks))
                    """)
            let raw = statement.sqliteStatement
            sqlite3_reset(raw)
            arena.reset(reserving: identifiers[start..<end].reduce(0) { $0 + $1.rawValue.utf8.count })
            var code = sqlite3_bind_int64(raw, 1, domainID)
            for (offset, identifier) in identifiers[start..<end].enumerated() where code == SQLITE_OK {
                var value = identifier.rawValue
                code = value.withUTF8 { bytes in
                    // Bound where the arena holds it (SQLITE_STATIC) until the bindings are cleared.
                    guard let copy = arena.copy(UnsafeRawBufferPointer(bytes)) else {
                        return sqlite3_bind_text(raw, Int32(offset + 2), "", 0, nil)
                    }
                    return sqlite3_bind_text(raw, Int32(offset + 2), copy.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
                }
            }
            while code == SQLITE_OK {
                let step = sqlite3_step(raw)
                guard step == SQLITE_ROW else {
                    code = step == SQLITE_DONE ? SQLITE_DONE : step
                    break
                }
                // A state is a short word: a small string, no allocation.
                let state = sqlite3_column_text(raw, 0).map { String(cString: $0) } ?? ""
                count(
                    state: state, pinned: sqlite3_column_int64(raw, 1) != 0, bytes: sqlite3_column_int64(raw, 2),
                    dataless: sqlite3_column_int64(raw, 3) != 0)
            }
            let message = code == SQLITE_DONE ? nil : String(cString: sqlite3_errmsg(db.sqliteConnection))
            sqlite3_reset(raw)
            sqlite3_clear_bindings(raw)
            if code != SQLITE_DONE { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
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
