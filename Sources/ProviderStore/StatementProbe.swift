import Foundation
import GRDB
import GRDBSQLite

/// A lookup stepped once through SQLite's own calls, its parameters bound in place: for the
/// questions asked once per file of a batch that mostly find nothing (does an unfinished
/// journal entry hold this operation? does another item hold this identifier?). GRDB's
/// `fetchOne` makes an arguments array, a cursor and a row for each: 2–4% of the CPU of
/// uploading 10,000 small files.
enum StatementProbe {
    /// Runs `statement` with `domainID` and `text` bound to its first two parameters and
    /// returns `read` of its first row, or `nil` when it has none. `read` gets SQLite's
    /// statement on that row (its columns are valid only then).
    /// - Throws: `DatabaseError` when SQLite fails.
    static func first<T>(
        _ statement: Statement, _ domainID: Int64, _ text: String, in db: Database, _ read: (OpaquePointer) -> T
    ) throws -> T? {
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        defer {
            sqlite3_reset(raw)
            sqlite3_clear_bindings(raw)
        }
        var code = sqlite3_bind_int64(raw, 1, domainID)
        // SQLITE_STATIC (a nil destructor): the bytes are read only during the step below. All
        // of them, with their count: a NUL inside the text does not end it.
        let length = Int32(clamping: text.utf8.count)
        let found: T? = text.withCString { chars in
            if code == SQLITE_OK { code = sqlite3_bind_text(raw, 2, chars, length, nil) }
            guard code == SQLITE_OK else { return nil }
            code = sqlite3_step(raw)
            guard code == SQLITE_ROW else { return nil }
            code = SQLITE_OK
            return read(raw)
        }
        if code != SQLITE_OK && code != SQLITE_DONE {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
                sql: statement.sql)
        }
        return found
    }

    /// Column `column` of the row `statement` is on, as text (every byte of it; empty for NULL).
    static func text(_ statement: OpaquePointer, _ column: Int32) -> String {
        let bytes = UnsafeRawBufferPointer(
            start: sqlite3_column_text(statement, column), count: Int(sqlite3_column_bytes(statement, column)))
        return String(decoding: bytes, as: UTF8.self)
    }
}
