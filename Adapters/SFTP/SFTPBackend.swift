import AdapterKit
import Foundation
import Logging
import ProviderCore

/// A backend over a folder on an SFTP server (any OpenSSH-compatible server), through libssh2.
///
/// Identifiers are paths relative to the root folder (`docs/a.txt`); the root folder is
/// ``ItemIdentifier/rootContainer``. Symlinks on the server are reported as symlinks and never
/// followed: items are looked up with `lstat`, and a folder below the root is used only when its
/// resolved path is exactly the path asked for, so nothing outside the root is reachable.
/// The server's host key is checked against known_hosts before any credential is sent.
///
/// libssh2 is blocking: each connection of the pool (``connections``, default 4) lives on a
/// thread of its own and serves one operation at a time; parallel operations use parallel
/// connections. Connections are opened on first use, reused, and re-opened after the server
/// drops them.
public final class SFTPBackend: Backend {
    /// The most items one page of a listing holds.
    public let pageSize: Int
    /// How many connections (and threads) serve operations at once.
    public let connections: Int

    /// Fixes how many connections a ranged transfer uses (tests); `nil`: see
    /// ``connectionsPerTransfer()``.
    let streamsPerTransfer: Int?
    /// Where to connect; resolved through the ssh configuration on the first connection.
    let target: ConnectionTarget
    let pool: ConnectionPool
    let listings = ListingCache()
    /// Closes the files ranged reads keep open once they are idle.
    let readHandleSweeper: IdleHandleSweeper
    /// Where the backend tells what it did on its own (abandoned staging files it removed).
    static let logger = Logger(label: "fileprovider.sftp")

    public let capabilities = BackendCapabilities(
        hasChangeFeed: false, supportsThumbnails: false, supportsRangedReads: true,
        supportsServerSideMove: true, supportsConditionalWrites: false, supportsSymlinks: true,
        creatableKinds: [.file, .folder, .symlink], identifiersArePathDerived: true,
        // A fetch opens its destination with `O_CREAT` (``LocalFile/openDestination(_:keeping:)``).
        createsFetchDestinations: true,
        // The executable bit: the permissions attribute.
        supportsFileSystemFlags: true)

    /// Makes a backend for a server; nothing is connected (and the ssh configuration is not
    /// read) until the first operation.
    ///
    /// - Parameters:
    ///   - target: where and how to connect (see ``SFTPBackend/descriptor`` for the options
    ///     that produce it).
    ///   - connections: the most connections used at once, 1 to 64.
    ///   - pageSize: the most items per listing page, at least 1.
    ///   - streamsPerTransfer: how many connections a ranged transfer uses, instead of what
    ///     suits the processors (tests).
    ///   - readHandleIdleTime: how long a file stays open after its last ranged read, in
    ///     nanoseconds (tests make it short).
    /// - Throws: `invalidArgument` when `connections` or `pageSize` is out of range.
    init(
        target: ConnectionTarget, connections: Int = 4, pageSize: Int = 2000, streamsPerTransfer: Int? = nil,
        readHandleIdleTime: UInt64 = SFTPBackend.readHandleIdleTime
    ) throws(FileProviderError) {
        guard (1...64).contains(connections) else {
            throw FileProviderError(.invalidArgument, "--connections takes 1 to 64, not \(connections)")
        }
        guard pageSize >= 1 else {
            throw FileProviderError(.invalidArgument, "the page size must be at least 1, not \(pageSize)")
        }
        self.target = target
        self.connections = connections
        self.pageSize = pageSize
        self.streamsPerTransfer = streamsPerTransfer
        pool = ConnectionPool(target: target, size: connections)
        readHandleSweeper = IdleHandleSweeper(pool: pool, idleTime: readHandleIdleTime)
    }

    /// A backend over settings that need no resolution (tests).
    ///
    /// - Throws: `invalidArgument` when `connections` is out of range.
    convenience init(settings: ConnectionSettings, connections: Int = 4) throws(FileProviderError) {
        try self.init(target: ConnectionTarget(resolved: settings), connections: connections)
    }

    /// The connection settings, once the first connection resolved them; else `nil`.
    var resolvedSettings: ConnectionSettings? { target.current }

    /// Closes the connections and stops their threads.
    public func close() async { await pool.close() }

    /// Runs `body` on a pooled connection's thread; sets `flag` if the task is cancelled. An
    /// `operation` is logged at `trace` level on `path` (``SFTPRequestLog``), with the bytes
    /// `moved` says it moved.
    func withConnection<T: Sendable>(
        _ flag: CancellationFlag? = nil, operation: String? = nil, path: SFTPPath = SFTPPath(components: []),
        moved: @escaping @Sendable (T) -> Int64? = { _ in nil },
        _ body: @escaping @Sendable (SFTPConnection) throws(FileProviderError) -> T
    ) async throws(FileProviderError) -> T {
        let started = DispatchTime.now().uptimeNanoseconds
        do {
            let result: T
            if let flag {
                result = try await withCancellationFlag(flag) { () async throws(FileProviderError) -> T in
                    try await self.pool.run(body)
                }
            } else {
                result = try await pool.run(body)
            }
            if let operation, SFTPRequestLog.isEnabled {
                SFTPRequestLog.log(
                    operation, path.display, endpoint: pool.target.name, seconds: RequestLogText.seconds(since: started), error: nil,
                    bytes: moved(result))
            }
            return result
        } catch {
            if let operation {
                SFTPRequestLog.log(
                    operation, path.display, endpoint: pool.target.name, seconds: RequestLogText.seconds(since: started), error: error,
                    bytes: nil)
            }
            throw error
        }
    }

    /// Runs `body` on this operation's thread and lends `helper` the pool's connections that
    /// are free now, up to `streams - 1` of them, each on its own thread; returns once every
    /// helper is done. A helper is told (the closure it gets) to stop between two pieces of work
    /// when another operation waits for a connection.
    ///
    /// With `settledBy` (a read whose pieces are all taken from that schedule): returns once
    /// the threads working on the schedule are done, not waiting for a helper still opening its
    /// connection (about 0.3 s for an SSH handshake and its `ssh`): it finds the schedule closed
    /// and does nothing. A read of 16 MiB waited that long for a helper that never helped.
    func sharing(
        _ streams: Int, settledBy schedule: RangeSchedule? = nil,
        helper: @escaping @Sendable (SFTPConnection, _ yield: () -> Bool) throws(FileProviderError) -> Void,
        _ body: () -> Void
    ) {
        let helpers =
            streams < 2
            ? nil
            : pool.lend(upTo: streams - 1) { connection throws(FileProviderError) in
                try helper(connection) { self.pool.hasWaiters }
            }
        body()
        if let schedule {
            schedule.closeAndWaitForWorkers()
        } else {
            helpers?.wait()
        }
    }

    // MARK: Backend

    /// Returns the current metadata of one item.
    ///
    /// - Throws: `noSuchItem` when nothing is at the identifier's path, or a folder on the way
    ///   is a symlink; `serverUnreachable` / `notAuthenticated` when the server cannot be used
    ///   (including an unknown or changed host key).
    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        let path = try SFTPPath(identifier)
        return try await withConnection(operation: "STAT", path: path) { connection throws(FileProviderError) -> Item in
            try self.locate(path, on: connection).item
        }
    }
}
