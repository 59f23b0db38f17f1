import AdapterKit
import Foundation
import ProviderCore

/// A fixed number of SFTP connections, each living on a thread of its own, never on Swift's
/// cooperative pool.
///
/// Connections are opened on first use and kept for later operations. An operation waits for a
/// free connection; one whose connection was dropped by the server gets a new connection, and
/// an operation that failed because the connection had died before it did anything runs once
/// more on a fresh connection.
final class ConnectionPool: @unchecked Sendable {
    /// One connection and the thread it lives on. `connection` is only touched on that thread.
    final class Slot: @unchecked Sendable {
        let executor: BlockingExecutor
        var connection: SFTPConnection?

        init(name: String) { executor = BlockingExecutor(name: name, threads: 1) }
    }

    let target: ConnectionTarget
    private let slots: [Slot]
    /// Free slots (the most recently used is taken first, so sequential work reuses one
    /// connection) and the operations waiting for one.
    private let pool: SessionPool<Slot>

    init(target: ConnectionTarget, size: Int) {
        self.target = target
        slots = (0..<max(1, size)).map { Slot(name: "sftp-\(target.name)-\($0)") }
        pool = SessionPool(slots.reversed())
    }

    deinit {
        for slot in slots { slot.executor.shutDown() }
    }

    /// Runs `body` with a connection, on that connection's thread.
    ///
    /// - Throws: what `body` throws; what connecting throws (`serverUnreachable`,
    ///   `notAuthenticated`, …); `cancelled` when the task is cancelled before it starts.
    func run<T: Sendable>(_ body: @escaping @Sendable (SFTPConnection) throws(FileProviderError) -> T)
        async throws(FileProviderError) -> T
    {
        if Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
        let slot = await pool.acquire()
        defer { pool.release(slot) }
        let target = self.target
        return try await slot.executor.run { () throws -> T in
            try Self.perform(body, in: slot, target: target)
        }
    }

    private static func perform<T>(
        _ body: (SFTPConnection) throws(FileProviderError) -> T, in slot: Slot, target: ConnectionTarget
    ) throws(FileProviderError) -> T {
        let connection: SFTPConnection
        if let existing = slot.connection, !existing.isDead {
            connection = existing
        } else {
            slot.connection = nil
            connection = try SFTPConnection(settings: try target.settings())
            slot.connection = connection
        }
        connection.beginOperation()
        do throws(FileProviderError) {
            return try body(connection)
        } catch {
            guard connection.isDead else { throw error }
            slot.connection = nil
            guard connection.diedBeforeDoingAnything else { throw error }
            // The server dropped an idle connection: nothing of this operation reached it.
            let fresh = try SFTPConnection(settings: try target.settings())
            slot.connection = fresh
            fresh.beginOperation()
            do throws(FileProviderError) {
                return try body(fresh)
            } catch {
                if fresh.isDead { slot.connection = nil }
                throw error
            }
        }
    }

    /// Whether an operation is waiting for a connection: helpers then give theirs back.
    var hasWaiters: Bool { pool.hasWaiters }

    /// Runs `body` on up to `count` connections that are free now, each on its own thread, and
    /// returns at once; ``HelperGroup/wait()`` blocks until all of them are done.
    ///
    /// For an operation that can share its work (the ranges of a large transfer): it never
    /// waits for a busy connection, so it takes nothing from operations already running, and
    /// `body` should stop once ``hasWaiters`` says another operation wants a connection. An
    /// error thrown by `body` or by connecting is dropped: the helper just stops helping, and
    /// `body` reports what matters through state it shares with the operation.
    func lend(upTo count: Int, _ body: @escaping @Sendable (SFTPConnection) throws(FileProviderError) -> Void)
        -> HelperGroup
    {
        let taken = pool.takeIdle(upTo: count)
        let group = HelperGroup(count: taken.count)
        let target = self.target
        let job = HelperJob(body, helpers: taken.count)
        for slot in taken {
            Task.detached {
                _ = try? await slot.executor.run { () throws in
                    guard let body = job.body else { return }
                    try Self.perform(body, in: slot, target: target)
                }
                self.pool.release(slot)
                job.helperDone()
                group.finished()
            }
        }
        return group
    }

    /// Runs `body` with every open connection, each on its own thread, and returns at once:
    /// for upkeep between operations (closing idle handles). A job on a connection's thread
    /// never overlaps the operation that holds the connection, which runs on that thread too.
    func forEachConnection(_ body: @escaping @Sendable (SFTPConnection) -> Void) {
        for slot in slots {
            Task.detached {
                _ = try? await slot.executor.run {
                    if let connection = slot.connection, !connection.isDead { body(connection) }
                }
            }
        }
    }

    /// Closes every connection and stops the threads.
    func close() async {
        for slot in slots {
            _ = try? await slot.executor.run { slot.connection = nil }
            slot.executor.shutDown()
        }
    }
}

/// The closure ``ConnectionPool/lend(upTo:_:)`` runs on its helpers, let go of once the last
/// helper is done and before the operation hears so: what it captured (the file a ranged read
/// writes into) was released only when the helpers' tasks were torn down, after the operation
/// returned, and a file still open for writing then made the engine's completion of the file
/// fail.
private final class HelperJob: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: (@Sendable (SFTPConnection) throws(FileProviderError) -> Void)?
    private var running: Int

    init(_ body: @escaping @Sendable (SFTPConnection) throws(FileProviderError) -> Void, helpers: Int) {
        stored = body
        running = helpers
    }

    /// The closure, or `nil` once every helper is done.
    var body: (@Sendable (SFTPConnection) throws(FileProviderError) -> Void)? { lock.withLock { stored } }

    /// One helper is done; the last one lets go of the closure.
    func helperDone() {
        let released = lock.withLock { () -> (@Sendable (SFTPConnection) throws(FileProviderError) -> Void)? in
            running -= 1
            guard running == 0 else { return nil }
            defer { stored = nil }
            return stored
        }
        _ = released  // released here, outside the lock
    }
}

/// The helpers ``ConnectionPool/lend(upTo:_:)`` started for one operation.
final class HelperGroup: @unchecked Sendable {
    private let condition = NSCondition()
    private var running: Int

    fileprivate init(count: Int) { running = count }

    fileprivate func finished() {
        condition.lock()
        running -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Blocks the calling thread (a connection's own, never the cooperative pool) until every
    /// helper is done and its connection is back in the pool.
    func wait() {
        condition.lock()
        while running > 0 { condition.wait() }
        condition.unlock()
    }
}

/// Where a backend connects: the domain's options, resolved through OpenSSH's configuration
/// (``SSHResolver``) once, on the thread of the first connection, then kept for the backend's
/// life. A failed resolution is not kept: the next connection tries again.
final class ConnectionTarget: @unchecked Sendable {
    /// The options as given; `nil` when the target was made from resolved settings.
    let request: ConnectionRequest?
    /// The `host` option, for thread names.
    let name: String
    /// `nil`: one made at resolution (`ssh -G` when `ssh` is on `PATH`, else the built-in
    /// parser, in the environment of that moment).
    private let resolver: SSHResolver?
    private let lock = NSLock()
    private var resolved: ConnectionSettings?

    /// A target resolved on first use with `resolver` (default: `ssh -G` when `ssh` is on
    /// `PATH`, else the built-in parser).
    init(request: ConnectionRequest, resolver: SSHResolver? = nil) {
        self.request = request
        self.resolver = resolver
        name = request.host
    }

    /// A target that needs no resolution.
    init(resolved settings: ConnectionSettings) {
        request = nil
        resolver = nil
        name = settings.alias
        resolved = settings
    }

    /// The settings once resolved, else `nil` (nothing has connected yet).
    var current: ConnectionSettings? { lock.withLock { resolved } }

    /// The resolved settings; resolves them the first time (blocking: a connection's thread).
    ///
    /// - Throws: what ``SSHResolver/resolve(_:)`` throws.
    func settings() throws(FileProviderError) -> ConnectionSettings {
        lock.lock()
        defer { lock.unlock() }
        if let resolved { return resolved }
        guard let request else { throw FileProviderError(.invalidArgument, "no connection settings") }
        let settings = try (resolver ?? SSHResolver(sshPath: SSHResolver.findSSH())).resolve(request)
        resolved = settings
        SFTPBackend.logger.debug(
            "\(request.host) resolves to \(settings.user)@\(settings.host):\(settings.port)\(settings.proxy.map { " through the \($0.summary)" } ?? ""), identities \(settings.identityFiles), agent \(settings.agentSocket ?? "none"), known hosts \(settings.knownHostsPath)"
        )
        return settings
    }
}
