import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// `error` as the `localIOFailure` the store's methods throw, naming the database:
    /// `SQLITE_FULL` says to free space; other database errors carry SQLite's result code with
    /// its extended code (``describe(_:)``).
    func wrap(_ error: any Error) -> FileProviderError {
        if let error = error as? FileProviderError { return error }
        if let error = error as? DatabaseError, error.resultCode == .SQLITE_FULL {
            return FileProviderError(.localIOFailure, "the disk holding \(url.path) is full: free some space and try again")
        }
        if let damaged = Self.damaged(error, path: url.path) { return damaged }
        return FileProviderError(.localIOFailure, "metadata database \(url.path): \(Self.describe(error))")
    }

    /// For an error that says the database file is damaged (`SQLITE_CORRUPT`, `SQLITE_NOTADB`
    /// and their extended codes, `SQLITE_IOERR_CORRUPTFS`): a `localIOFailure` saying so and how
    /// to recover, instead of SQLite's bare `database disk image is malformed`; `nil` for
    /// any other error.
    static func damaged(_ error: any Error, path: String) -> FileProviderError? {
        guard let error = error as? DatabaseError,
            error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB
                || error.extendedResultCode.rawValue == 8458
        else { return nil }
        let name = resultCodeNames[error.extendedResultCode.rawValue] ?? "SQLite error \(error.extendedResultCode.rawValue)"
        return FileProviderError(
            .localIOFailure,
            """
            the metadata database \(path) is damaged (\(name)): a disk error or a copy made while it was written broke \
            it. The files in the replica folders are safe (the database only records them). Check it with \
            sqlite3 '\(path)' 'PRAGMA integrity_check'; to start again, stop 'fileproviderctl serve', move \
            metadata.sqlite and its -wal and -shm files aside, and add each domain again on its replica folder \
            with 'fileproviderctl domain add NAME --backend KIND ... --replica DIR --adopt-replica' (see \
            "A damaged database" in Docs/Database.md)
            """)
    }

    /// An error for a message: a `DatabaseError` as "SQLite error 10 (SQLITE_IOERR_SHORT_READ /
    /// extended 522): disk I/O error - while executing `PRAGMA schema_version`", naming the
    /// extended result code (which of SQLite's I/O errors it was, for instance) that GRDB's
    /// description leaves out; any other error as it describes itself.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        let primary = error.resultCode.rawValue
        let extended = error.extendedResultCode.rawValue
        let name = resultCodeNames[extended]
        var text = "SQLite error \(primary)"
        if extended == primary {
            text += name.map { " (\($0))" } ?? ""
        } else {
            text += " (\(name.map { "\($0) / " } ?? "")extended \(extended))"
        }
        if let message = error.message { text += ": \(message)" }
        if let sql = error.sql { text += " - while executing `\(sql.trimmingCharacters(in: .whitespacesAndNewlines))`" }
        return text
    }

    /// The names of SQLite's primary and extended result codes (sqlite3.h, 3.40).
    static let resultCodeNames: [Int32: String] = [
        0: "SQLITE_OK", 256: "SQLITE_OK_LOAD_PERMANENTLY", 512: "SQLITE_OK_SYMLINK", 1: "SQLITE_ERROR",
        257: "SQLITE_ERROR_MISSING_COLLSEQ", 513: "SQLITE_ERROR_RETRY", 769: "SQLITE_ERROR_SNAPSHOT",
        2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT", 516: "SQLITE_ABORT_ROLLBACK", 5: "SQLITE_BUSY",
        261: "SQLITE_BUSY_RECOVERY", 517: "SQLITE_BUSY_SNAPSHOT", 773: "SQLITE_BUSY_TIMEOUT", 6: "SQLITE_LOCKED",
        262: "SQLITE_LOCKED_SHAREDCACHE", 518: "SQLITE_LOCKED_VTAB", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY",
        264: "SQLITE_READONLY_RECOVERY", 520: "SQLITE_READONLY_CANTLOCK", 776: "SQLITE_READONLY_ROLLBACK",
        1032: "SQLITE_READONLY_DBMOVED", 1288: "SQLITE_READONLY_CANTINIT", 1544: "SQLITE_READONLY_DIRECTORY",
        9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR", 266: "SQLITE_IOERR_READ", 522: "SQLITE_IOERR_SHORT_READ",
        778: "SQLITE_IOERR_WRITE", 1034: "SQLITE_IOERR_FSYNC", 1290: "SQLITE_IOERR_DIR_FSYNC",
        1546: "SQLITE_IOERR_TRUNCATE", 1802: "SQLITE_IOERR_FSTAT", 2058: "SQLITE_IOERR_UNLOCK",
        2314: "SQLITE_IOERR_RDLOCK", 2570: "SQLITE_IOERR_DELETE", 2826: "SQLITE_IOERR_BLOCKED",
        3082: "SQLITE_IOERR_NOMEM", 3338: "SQLITE_IOERR_ACCESS", 3594: "SQLITE_IOERR_CHECKRESERVEDLOCK",
        3850: "SQLITE_IOERR_LOCK", 4106: "SQLITE_IOERR_CLOSE", 4362: "SQLITE_IOERR_DIR_CLOSE",
        4618: "SQLITE_IOERR_SHMOPEN", 4874: "SQLITE_IOERR_SHMSIZE", 5130: "SQLITE_IOERR_SHMLOCK",
        5386: "SQLITE_IOERR_SHMMAP", 5642: "SQLITE_IOERR_SEEK", 5898: "SQLITE_IOERR_DELETE_NOENT",
        6154: "SQLITE_IOERR_MMAP", 6410: "SQLITE_IOERR_GETTEMPPATH", 6666: "SQLITE_IOERR_CONVPATH",
        6922: "SQLITE_IOERR_VNODE", 7178: "SQLITE_IOERR_AUTH", 7434: "SQLITE_IOERR_BEGIN_ATOMIC",
        7690: "SQLITE_IOERR_COMMIT_ATOMIC", 7946: "SQLITE_IOERR_ROLLBACK_ATOMIC", 8202: "SQLITE_IOERR_DATA",
        8458: "SQLITE_IOERR_CORRUPTFS", 11: "SQLITE_CORRUPT", 267: "SQLITE_CORRUPT_VTAB",
        523: "SQLITE_CORRUPT_SEQUENCE", 779: "SQLITE_CORRUPT_INDEX", 12: "SQLITE_NOTFOUND", 13: "SQLITE_FULL",
        14: "SQLITE_CANTOPEN", 270: "SQLITE_CANTOPEN_NOTEMPDIR", 526: "SQLITE_CANTOPEN_ISDIR",
        782: "SQLITE_CANTOPEN_FULLPATH", 1038: "SQLITE_CANTOPEN_CONVPATH", 1294: "SQLITE_CANTOPEN_DIRTYWAL",
        1550: "SQLITE_CANTOPEN_SYMLINK", 15: "SQLITE_PROTOCOL", 16: "SQLITE_EMPTY", 17: "SQLITE_SCHEMA",
        18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 275: "SQLITE_CONSTRAINT_CHECK",
        531: "SQLITE_CONSTRAINT_COMMITHOOK", 787: "SQLITE_CONSTRAINT_FOREIGNKEY", 1043: "SQLITE_CONSTRAINT_FUNCTION",
        1299: "SQLITE_CONSTRAINT_NOTNULL", 1555: "SQLITE_CONSTRAINT_PRIMARYKEY", 1811: "SQLITE_CONSTRAINT_TRIGGER",
        2067: "SQLITE_CONSTRAINT_UNIQUE", 2323: "SQLITE_CONSTRAINT_VTAB", 2579: "SQLITE_CONSTRAINT_ROWID",
        2835: "SQLITE_CONSTRAINT_PINNED", 3091: "SQLITE_CONSTRAINT_DATATYPE", 20: "SQLITE_MISMATCH",
        21: "SQLITE_MISUSE", 22: "SQLITE_NOLFS", 23: "SQLITE_AUTH", 279: "SQLITE_AUTH_USER", 24: "SQLITE_FORMAT",
        25: "SQLITE_RANGE", 26: "SQLITE_NOTADB", 27: "SQLITE_NOTICE", 283: "SQLITE_NOTICE_RECOVER_WAL",
        539: "SQLITE_NOTICE_RECOVER_ROLLBACK", 28: "SQLITE_WARNING", 284: "SQLITE_WARNING_AUTOINDEX", 100: "SQLITE_ROW",
        101: "SQLITE_DONE",
    ]
}
