import Foundation
import GRDB
import GRDBSQLite
import ProviderCore

/// A folder's items with only the columns a listing shows, read by stepping SQLite's statement
/// directly: the FUSE layout lists dataless folders from here (a `find` of 100,000 items
/// through a fresh mount is 100,000 entries, and decoding whole ``ItemRecord``s through GRDB's
/// rows was a fifth of `serve`'s time there).
extension MetadataStore {
    private static let entryColumns = "path, kind, size, creationDate, modificationDate, symlinkTarget, isDataless, fileSystemFlags"
    // After a name: strictly greater. From a skip past a subfolder's rows: greater or equal.
    private static let entriesAfter = """
        SELECT \(entryColumns) FROM item INDEXED BY item_path WHERE domainID = ? AND path > ? AND path < ? ORDER BY path
        """
    private static let entriesFrom = """
        SELECT \(entryColumns) FROM item INDEXED BY item_path WHERE domainID = ? AND path >= ? AND path < ? ORDER BY path
        """
    // The root's children have no upper bound on their paths (and the root's own path is '').
    private static let rootEntriesAfter = """
        SELECT \(entryColumns) FROM item INDEXED BY item_path WHERE domainID = ? AND path > ? AND path <> '' ORDER BY path
        """
    private static let rootEntriesFrom = """
        SELECT \(entryColumns) FROM item INDEXED BY item_path WHERE domainID = ? AND path >= ? AND path <> '' ORDER BY path
        """

    /// Fills `page` with at most `limit` of the items directly inside the folder at `folder`
    /// (its path's bytes, empty for the root), in path order, after the item named `after`
    /// (from the first with nil), in one read transaction; ``FolderEntryPage/isLast`` says
    /// whether the folder ends there. Skips what lies below subfolders as
    /// ``children(domainID:inFolderAt:after:limit:)`` does.
    ///
    /// What comes from the database is checked: a row whose name could not be a name (empty,
    /// over 255 bytes, NUL) is left out; a negative size reads 0, an unknown kind a file, a date
    /// that is not a finite number 0.
    /// - Throws: `localIOFailure` when the database fails.
    public func folderEntries(
        domainID: Int64, inFolderAt folder: [UInt8], after: [UInt8]?, limit: Int, into page: inout FolderEntryPage
    ) throws(FileProviderError) {
        page.removeAll()
        let prefix = folder.isEmpty ? [] : folder + [UInt8(ascii: "/")]
        let high = folder.isEmpty ? nil : folder + [UInt8(ascii: "0")]
        let wanted = max(1, limit)
        let isRoot = high == nil
        var low = prefix + (after ?? [])
        var inclusive = false
        try read { db in
            while true {
                let sql =
                    isRoot
                    ? (inclusive ? Self.rootEntriesFrom : Self.rootEntriesAfter) : (inclusive ? Self.entriesFrom : Self.entriesAfter)
                let statement = try db.cachedStatement(sql: sql)
                let raw = statement.sqliteStatement
                sqlite3_reset(raw)
                sqlite3_clear_bindings(raw)
                defer {
                    sqlite3_reset(raw)
                    sqlite3_clear_bindings(raw)
                }
                sqlite3_bind_int64(raw, 1, domainID)
                // Bound without a copy (SQLITE_STATIC): the buffers outlive the stepping (the
                // statement is reset before they go). Each ends with a NUL, so none is empty.
                let skipTo: [UInt8]? = try (low + [0]).withUnsafeBufferPointer { lowBytes in
                    try ((high ?? []) + [0]).withUnsafeBufferPointer { highBytes in
                        _ = lowBytes.withMemoryRebound(to: CChar.self) { sqlite3_bind_text(raw, 2, $0.baseAddress, Int32(low.count), nil) }
                        if let high {
                            _ = highBytes.withMemoryRebound(to: CChar.self) {
                                sqlite3_bind_text(raw, 3, $0.baseAddress, Int32(high.count), nil)
                            }
                        }
                        return try Self.stepEntries(raw, prefixLength: prefix.count, wanted: wanted, into: &page, db: db, sql: sql)
                    }
                }
                guard let skipTo else { return }
                (low, inclusive) = (skipTo, true)
            }
        }
    }

    /// Steps `raw` and appends its rows to `page` until `wanted` entries, the end (the page is
    /// then the last), or a row below a subfolder: returns where to start again then (past the
    /// subfolder's rows), else nil.
    private static func stepEntries(
        _ raw: SQLiteStatement, prefixLength: Int, wanted: Int, into page: inout FolderEntryPage, db: Database, sql: String
    ) throws -> [UInt8]? {
        while true {
            let code = sqlite3_step(raw)
            if code == SQLITE_DONE {
                page.isLast = true
                return nil
            }
            guard code == SQLITE_ROW else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: sql)
            }
            guard let text = sqlite3_column_text(raw, 0) else { continue }
            let path = UnsafeRawBufferPointer(start: text, count: Int(sqlite3_column_bytes(raw, 0)))
            guard path.count > prefixLength else { continue }
            let name = UnsafeRawBufferPointer(rebasing: path[prefixLength...])
            if let slash = name.firstIndex(of: UInt8(ascii: "/")) {
                // A row below the subfolder `name[..<slash]`: go on from `…/sub0`, past all of them.
                return Array(path[..<(prefixLength + slash)]) + [UInt8(ascii: "0")]
            }
            let entry = FolderEntryPage.Entry(
                nameStart: 0, nameCount: 0, kind: kind(raw, 1), size: max(0, sqlite3_column_int64(raw, 2)),
                modificationSeconds: seconds(raw, 4) ?? seconds(raw, 3) ?? 0,
                fileSystemFlags: Int(truncatingIfNeeded: sqlite3_column_int64(raw, 7)),
                symlinkTargetLength: sqlite3_column_type(raw, 5) == SQLITE_NULL ? 0 : Int(sqlite3_column_bytes(raw, 5)),
                isDataless: sqlite3_column_int64(raw, 6) != 0)
            guard page.append(name: name, entry) else { continue }
            if page.entries.count >= wanted { return nil }
        }
    }

    /// The kind in column `column` (text: `file`, `folder`, `symlink`); a file when unknown, as
    /// ``ItemRecord/init(row:)`` reads it.
    private static func kind(_ raw: SQLiteStatement, _ column: Int32) -> ItemKind {
        guard let text = sqlite3_column_text(raw, column) else { return .file }
        let bytes = UnsafeRawBufferPointer(start: text, count: Int(sqlite3_column_bytes(raw, column)))
        if bytes.elementsEqual("folder".utf8) { return .folder }
        if bytes.elementsEqual("symlink".utf8) { return .symlink }
        return .file
    }

    /// The finite number of seconds in column `column`, nil when `NULL` or not finite.
    private static func seconds(_ raw: SQLiteStatement, _ column: Int32) -> Double? {
        guard sqlite3_column_type(raw, column) != SQLITE_NULL else { return nil }
        let value = sqlite3_column_double(raw, column)
        return value.isFinite ? value : nil
    }
}
