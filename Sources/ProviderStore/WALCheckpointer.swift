import Foundation
import GRDBSQLite
import ProviderCore

/// Copies the write-ahead log back into the database file on a thread of its own, so the
/// connection that writes does not wait for it.
///
/// SQLite's automatic checkpoint runs inside the `COMMIT` that takes the log past 1,000 pages
/// (4 MiB): that commit copies the log into the database and waits for two `fdatasync`s. A
/// first sync of 1,000,000 items commits about 250 MiB of log, so its writer, the sync's
/// critical path, stopped for about 120 checkpoints and their disk flushes. Here the writing
/// connection's log hook (``install(on:)``) only asks this thread for a *passive* checkpoint
/// (one that never blocks a writer or a reader) from a connection of its own, and goes on. Only
/// when the log still grows past ``inlinePages`` (the thread cannot keep up, or readers hold old
/// snapshots) does the writer checkpoint itself, as SQLite would have, so the log stays bounded.
///
/// One thread serves every database of the process; a request for a database already waiting
/// is not queued twice.
final class WALCheckpointer: @unchecked Sendable {
    /// The log size, in pages, from which a commit asks for a checkpoint (SQLite's default
    /// automatic checkpoint).
    static let backgroundPages: Int32 = 1000
    /// The log size, in pages, from which the writer checkpoints itself (64 MiB of 4 KiB pages).
    static let inlinePages: Int32 = 16_384

    static let shared = WALCheckpointer()

    /// Guards ``waiting`` and ``started``, and wakes the thread.
    private let wake = NSCondition()
    /// Databases waiting for a checkpoint, the one being checkpointed first.
    private var waiting: [String] = []
    private var started = false

    /// Replaces SQLite's automatic checkpoint of `connection` (a writing connection) with
    /// requests to this thread.
    static func install(on connection: OpaquePointer) {
        sqlite3_wal_hook(connection, walHook, nil)
    }

    /// Called by SQLite after each commit of a connection with ``install(on:)``, with the
    /// number of pages in the log. Returns `SQLITE_OK` (an error here would be the commit's).
    private static let walHook: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32 = {
        _, connection, database, pages in
        if pages >= inlinePages {
            // Busy (another checkpoint runs) or failed: the next commit tries again.
            _ = sqlite3_wal_checkpoint_v2(connection, database, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        } else if pages >= backgroundPages, let file = sqlite3_db_filename(connection, database), file.pointee != 0 {
            shared.request(String(cString: file))
        }
        return SQLITE_OK
    }

    /// Asks for a passive checkpoint of the database at `path`, unless one is waiting already.
    func request(_ path: String) {
        wake.lock()
        defer { wake.unlock() }
        guard !waiting.contains(path) else { return }
        waiting.append(path)
        if !started {
            started = true
            let thread = Thread { [self] in
                ThreadName.setCurrent("wal-checkpoint")
                loop()
            }
            thread.name = "wal-checkpoint"
            thread.start()
        }
        wake.signal()
    }

    private func loop() {
        while true {
            wake.lock()
            while waiting.isEmpty { wake.wait() }
            let path = waiting[0]
            wake.unlock()
            Self.checkpoint(path)
            wake.lock()
            waiting.removeFirst()
            wake.unlock()
        }
    }

    /// One passive checkpoint of the database at `path` from a connection opened for it.
    /// Failures are left to the next request (or to the writer's own checkpoint).
    private static func checkpoint(_ path: String) {
        var connection: OpaquePointer?
        defer { sqlite3_close_v2(connection) }
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let connection else { return }
        // A new connection learns that the database is in WAL mode from its first read.
        guard sqlite3_exec(connection, "PRAGMA schema_version", nil, nil, nil) == SQLITE_OK else { return }
        _ = sqlite3_wal_checkpoint_v2(connection, "main", SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    }
}
