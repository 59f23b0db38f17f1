import Foundation
import GRDB
import GRDBSQLite

/// Binds values to a prepared statement's parameters in order, straight through SQLite's
/// calls, and runs it once: for the statements of many rows a batch writes (a note per placed
/// download, the notes an item's new row drops). GRDB's `StatementArguments` boxes every value
/// in an existential and checks it: a third of the cost of those statements.
///
/// Text and blobs are copied into ``BindArena``, whose room the caller reserves first (at
/// ``init(_:reserving:)``, and with ``reserve(_:)`` before each further run of the statement),
/// and bound from there without another copy.
struct ParameterBinder {
    private let statement: Statement
    private let raw: OpaquePointer
    private let arena = BindArena()
    private var next: Int32 = 1
    private var code = SQLITE_OK

    /// Starts binding `statement`'s parameters from the first, with room for `bytes` bytes of
    /// text and blobs.
    init(_ statement: Statement, reserving bytes: Int) {
        self.statement = statement
        raw = statement.sqliteStatement
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
        arena.reset(reserving: bytes)
    }

    /// Makes room for `bytes` bytes of text and blobs for the next run's values (those bound
    /// before are gone: after ``execute(in:)`` only).
    func reserve(_ bytes: Int) { arena.reset(reserving: bytes) }

    mutating func bind(_ value: Int64) {
        if code == SQLITE_OK { code = sqlite3_bind_int64(raw, next, value) }
        next += 1
    }

    mutating func bind(_ value: Double) {
        if code == SQLITE_OK { code = sqlite3_bind_double(raw, next, value) }
        next += 1
    }

    mutating func bind(_ value: String) {
        var value = value
        value.withUTF8 { bytes in
            guard code == SQLITE_OK else { return }
            // A nil destructor is SQLITE_STATIC: the arena holds the bytes until the next reset.
            if let copy = arena.copy(UnsafeRawBufferPointer(bytes)) {
                code = sqlite3_bind_text(raw, next, copy.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
            } else {
                code = sqlite3_bind_text(raw, next, "", 0, nil)
            }
        }
        next += 1
    }

    /// A text, or `NULL` for `nil`.
    mutating func bind(_ value: String?) {
        guard let value else {
            if code == SQLITE_OK { code = sqlite3_bind_null(raw, next) }
            next += 1
            return
        }
        bind(value)
    }

    /// A blob, or `NULL` for `nil`; an empty blob stays a blob (`zeroblob(0)`).
    mutating func bind(_ value: Data?) {
        if code == SQLITE_OK {
            if let value {
                code = value.withUnsafeBytes { bytes in
                    guard let copy = arena.copy(bytes) else { return sqlite3_bind_zeroblob(raw, next, 0) }
                    return sqlite3_bind_blob(raw, next, copy, Int32(bytes.count), nil)
                }
            } else {
                code = sqlite3_bind_null(raw, next)
            }
        }
        next += 1
    }

    /// Runs the statement with what was bound (it changes rows: its result rows, if any, are
    /// not read), and clears the bindings: the next value bound is the first parameter's again.
    /// - Throws: `DatabaseError` with SQLite's message when binding or running fails.
    mutating func execute(in db: Database) throws {
        if code == SQLITE_OK {
            code = sqlite3_step(raw)
            if code == SQLITE_DONE || code == SQLITE_ROW { code = SQLITE_OK }
        }
        let message = code == SQLITE_OK ? nil : String(cString: sqlite3_errmsg(db.sqliteConnection))
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
        let failed = code
        (next, code) = (1, SQLITE_OK)
        if failed != SQLITE_OK {
            throw DatabaseError(resultCode: ResultCode(rawValue: failed), message: message, sql: statement.sql)
        }
    }
}
