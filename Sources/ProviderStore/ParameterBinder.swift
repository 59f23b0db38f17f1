import Foundation
import GRDB
import GRDBSQLite

/// Binds values to a prepared statement's parameters in order, straight through SQLite's
/// calls, and runs it: for the statements of many rows a batch writes (a note per placed
/// download, the notes an item's new row drops), and the lookups asked once per file that
/// nearly always find nothing (``first(in:_:)``: an unfinished journal entry of this operation?
/// another item holding this new identifier?). GRDB's `StatementArguments` boxes every value
/// in an existential and checks it (a third of the cost of those writes), and its `fetchOne`
/// makes a cursor and a row besides (2–4% of the CPU of uploading 10,000 small files).
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
        _ = try first(in: db) { _ in () }
    }

    /// Runs the statement with what was bound and returns `read` of its first row, `nil` when
    /// it has none; then clears the bindings, as ``execute(in:)`` does. `read` gets SQLite's
    /// statement on that row (its columns are valid only then: ``text(_:_:)``).
    /// - Throws: `DatabaseError` with SQLite's message when binding or running fails.
    mutating func first<T>(in db: Database, _ read: (OpaquePointer) -> T) throws -> T? {
        var found: T?
        if code == SQLITE_OK {
            code = sqlite3_step(raw)
            if code == SQLITE_ROW { found = read(raw) }
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
        return found
    }

    /// ``first(in:_:)`` with `domainID` and `text` bound to the statement's two parameters:
    /// the shape of the per-file lookups.
    /// - Throws: `DatabaseError` with SQLite's message when binding or running fails.
    mutating func first<T>(in db: Database, binding domainID: Int64, _ text: String, _ read: (OpaquePointer) -> T) throws -> T? {
        reserve(text.utf8.count)
        bind(domainID)
        bind(text)
        return try first(in: db, read)
    }

    /// Column `column` of the row `statement` is on, as text (every byte of it; empty for NULL).
    static func text(_ statement: OpaquePointer, _ column: Int32) -> String {
        let bytes = UnsafeRawBufferPointer(
            start: sqlite3_column_text(statement, column), count: Int(sqlite3_column_bytes(statement, column)))
        return String(decoding: bytes, as: UTF8.self)
    }
}
