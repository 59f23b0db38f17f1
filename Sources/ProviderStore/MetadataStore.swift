import CSQLiteConfig
import Foundation
import GRDB
import GRDBSQLite
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The shared metadata database of all domains: one SQLite file in WAL mode that the CLI, a
/// running `serve` process and other tools use at the same time.
///
/// Methods are synchronous and short; they block the calling thread while SQLite works. Every
/// method throws `FileProviderError` with code `localIOFailure` when the database fails (full
/// disk, corrupt file), with a message naming the database and SQLite's result code with its
/// extended code.
public final class MetadataStore: Sendable {
    /// The database file.
    public let url: URL
    let pool: DatabasePool

    /// Opens (creating when needed) the database at `url` and runs pending migrations.
    ///
    /// The database is readable and writable only by its owner (0600), its `-wal` and `-shm`
    /// files (which SQLite gives the database's mode) and its lock file too: it names every path
    /// of every domain. Files an older version made readable to others lose those permissions.
    ///
    /// - Throws: `localIOFailure` when the file cannot be opened or migrated.
    public init(url: URL) throws(FileProviderError) {
        _ = Self.sqliteConfigured
        self.url = url
        do {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Self.makePrivate(url.path)
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // Sync down writes some 8,000 rows per transaction; 8 MiB holds such a batch's
                // pages. 16 MiB measured the same CPU for a first sync of 100,000 and of 1,000,000
                // items and for a sync updating 100,000 rows, with 8-14 MiB more peak memory
                // (Database.md, connection settings).
                // Readers (up to five at once: sync down reads folders beside its walk) read a
                // folder's rows at a time; 4 MiB each, the file system's cache behind them.
                try db.execute(sql: "PRAGMA cache_size = \(db.configuration.readonly ? -4096 : -8192)")
                // Statement journals (one per INSERT OR REPLACE) stay in memory, not in temp files.
                try db.execute(sql: "PRAGMA temp_store = MEMORY")
                // A row INSERT OR REPLACE replaces fires the delete trigger that keeps the
                // item counters (itemCount) true.
                try db.execute(sql: "PRAGMA recursive_triggers = ON")
                // fnmatch and regexec for `find` (MetadataStore+Search).
                SearchFunctions.install(on: db)
                // The writer's log is checkpointed on a thread of its own (WALCheckpointer);
                // the log file is cut back to 16 MiB when it starts over.
                if !db.configuration.readonly, let connection = db.sqliteConnection {
                    WALCheckpointer.install(on: connection)
                    try db.execute(sql: "PRAGMA journal_size_limit = \(16 << 20)")
                }
            }
            pool = try Self.openExclusively(url.path, configuration: configuration, lockPath: url.path + ".lock")
        } catch {
            if let damaged = Self.damaged(error, path: url.path) { throw damaged }
            throw FileProviderError(.localIOFailure, "cannot open the metadata database \(url.path): \(Self.describe(error))")
        }
    }

    /// The version of the SQLite library this process uses (`sqlite3_libversion`), `3.46.1`.
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    /// The mode of the database and the files beside it: `rw-------`.
    public static let fileMode: mode_t = 0o600

    /// Creates the database file with ``fileMode`` when it is missing (SQLite takes an empty
    /// file as a new database, and gives its `-wal` and `-shm` files the database's mode), and
    /// takes group and other permissions away from the database, its `-wal`, `-shm` and lock
    /// files where an older version left them readable (chmod does not disturb processes that
    /// have them open).
    private static func makePrivate(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, fileMode)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw POSIXError.error("cannot create", path: path)
        }
        for file in [path, path + "-wal", path + "-shm", path + ".lock"] {
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & 0o077 != 0, info.st_uid == geteuid() else { continue }
            _ = chmod(file, info.st_mode & 0o7700)
        }
    }

    /// SQLite's process-wide settings, made once before the first connection opens.
    private static let sqliteConfigured: Int32 = fp_sqlite_configure()

    /// Opens the pool and runs the migrations while holding an exclusive lock on `lockPath`, so
    /// processes opening a new database at once neither race to switch it to WAL (which fails
    /// with SQLITE_BUSY at once) nor both run the migrations.
    private static func openExclusively(_ path: String, configuration: Configuration, lockPath: String) throws -> DatabasePool {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, fileMode)
        if fd < 0 { throw POSIXError.error("cannot open the lock file", path: lockPath) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            if errno != EINTR { throw POSIXError.error("cannot lock", path: lockPath) }
        }
        defer { flock(fd, LOCK_UN) }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try Migrations.migrate(pool)
        return pool
    }

    /// Runs `body` in a read transaction, turning database errors into `FileProviderError`.
    func read<T>(_ body: (Database) throws -> T) throws(FileProviderError) -> T {
        PoolCheck.note()
        do {
            return try Self.retryingLockProtocolErrors { try pool.read(body) }
        } catch {
            throw wrap(error)
        }
    }

    /// Runs `body` in a write transaction, turning database errors into `FileProviderError`.
    func write<T>(_ body: (Database) throws -> T) throws(FileProviderError) -> T {
        PoolCheck.note()
        do {
            return try Self.retryingLockProtocolErrors { try pool.write(body) }
        } catch {
            throw wrap(error)
        }
    }

    /// How many times a transaction is tried when SQLite answers `SQLITE_PROTOCOL`.
    static let lockProtocolAttempts = 3

    /// Runs `transaction`, again (up to ``lockProtocolAttempts`` times, a few milliseconds apart)
    /// while it fails with `SQLITE_PROTOCOL`: in WAL mode SQLite gives up reading the shared
    /// WAL index after many tries when other processes (`serve` and a command) keep changing
    /// it, before the transaction did anything; the busy timeout does not cover it, and SQLite
    /// says to try again.
    /// - Throws: what `transaction` throws, the last `SQLITE_PROTOCOL` included.
    static func retryingLockProtocolErrors<T>(_ transaction: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try transaction()
            } catch let error as DatabaseError where error.resultCode == .SQLITE_PROTOCOL && attempt < lockProtocolAttempts {
                usleep(useconds_t(2_000 * attempt))
                attempt += 1
            }
        }
    }

    /// Runs `PRAGMA integrity_check`; returns `ok` or SQLite's list of problems.
    public func integrityCheck() throws(FileProviderError) -> String {
        try read { db in
            try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "\n")
        }
    }

    /// The names of the migrations applied, in order.
    public func appliedMigrations() throws(FileProviderError) -> [String] {
        try read { db in try Migrations.migrator.appliedMigrations(db) }
    }
}
