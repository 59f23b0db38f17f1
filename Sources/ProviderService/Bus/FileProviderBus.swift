import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderStore

/// serve's D-Bus interface on the session bus: the served domains and their states, and
/// materialize / evict (each optionally recursive) / pin / unpin / why for a path in one of them — what a file manager's extension
/// or a tray icon needs. Docs/CLI.md ("D-Bus interface") is its stable contract.
///
/// Every method returns one string: the JSON the CLI's `--json` prints for the same request;
/// a method fails with a D-Bus error exactly when the CLI would exit non-zero (names in
/// ``BusErrorName``). Methods take absolute paths, and refuse any path outside the domains this
/// serve serves. The work runs in tasks over the engine; the bus has a thread of its own
/// (``BusConnection``).
public final class FileProviderBus: Sendable {
    /// The well-known name serve claims on the session bus.
    public static let name = "org.fileproviderkit.FileProvider1"
    /// The path of the one object.
    public static let objectPath = "/org/fileproviderkit/FileProvider1"
    /// The interface of the object.
    public static let interface = "org.fileproviderkit.FileProvider1"

    /// The methods that take a path.
    enum PathMethod: String, CaseIterable {
        case materialize = "Materialize"
        case evict = "Evict"
        case pin = "Pin"
        case unpin = "Unpin"
        case why = "Why"

        /// Whether the method takes the `recursive` flag after the path.
        var takesRecursive: Bool { self == .materialize || self == .evict }
    }

    static let introspection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="\(interface)">
            <method name="ListDomains"><arg name="domains" type="s" direction="out"/></method>
            <method name="Materialize"><arg name="path" type="s" direction="in"/><arg name="recursive" type="b" direction="in"/><arg name="outcomes" type="s" direction="out"/></method>
            <method name="Evict"><arg name="path" type="s" direction="in"/><arg name="recursive" type="b" direction="in"/><arg name="outcomes" type="s" direction="out"/></method>
            <method name="Pin"><arg name="path" type="s" direction="in"/><arg name="outcomes" type="s" direction="out"/></method>
            <method name="Unpin"><arg name="path" type="s" direction="in"/><arg name="outcomes" type="s" direction="out"/></method>
            <method name="Why"><arg name="path" type="s" direction="in"/><arg name="explanation" type="s" direction="out"/></method>
            <signal name="StateChanged"><arg name="domain" type="s"/><arg name="state" type="s"/></signal>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
          </interface>
        </node>
        """

    let manager: ProviderManager
    let domains: [String]
    let activity: SyncActivity
    let logger: Logger
    private let connection = Mutex<BusConnection?>(nil)
    /// The state last announced per domain (``DomainSyncState``'s raw value).
    private let announced = Mutex<[String: String]>([:])
    /// Domains whose state may have changed, for the task that announces (in order).
    private let changes: AsyncStream<String>
    private let changed: AsyncStream<String>.Continuation
    private let announcer = Mutex<Task<Void, Never>?>(nil)

    /// The interface for `domains` (served by this process) of `manager`, with their states
    /// from `activity`.
    public init(manager: ProviderManager, domains: [String], activity: SyncActivity, logger: Logger) {
        self.manager = manager
        self.domains = domains
        self.activity = activity
        self.logger = logger
        (changes, changed) = AsyncStream.makeStream(of: String.self)
    }

    /// Claims ``name`` on the session bus and starts answering. Without a session bus
    /// (no `DBUS_SESSION_BUS_ADDRESS`, no `$XDG_RUNTIME_DIR/bus`), without libsystemd, or when
    /// another process owns the name, logs one line and returns `false`: serve runs without it.
    @discardableResult
    public func start() async -> Bool {
        guard BusConnection.sessionBusConfigured() else {
            logger.notice(
                "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set, no $XDG_RUNTIME_DIR/bus): serving without the D-Bus interface")
            return false
        }
        let logger = self.logger
        do {
            let opened = try await BusConnection.open(
                name: Self.name, path: Self.objectPath, interface: Self.interface, introspection: Self.introspection,
                handler: { [self] connection, call in handle(call, on: connection) },
                ended: { failure in
                    if let failure { logger.warning("\(failure): the D-Bus interface is off until serve starts again") }
                })
            connection.withLock { $0 = opened }
        } catch {
            logger.warning("\(error.message): serving without the D-Bus interface")
            return false
        }
        for name in domains {
            if let record = try? await manager.blocking({ [manager] () throws(FileProviderError) in try manager.domain(named: name) }) {
                let state = DomainSyncState.of(record, activity: activity).state.rawValue
                announced.withLock { $0[name] = state }
            }
        }
        let changes = self.changes
        announcer.withLock { $0 = Task { [self] in for await domain in changes { await announce(domain) } } }
        activity.listen { [changed] domain in changed.yield(domain) }
        logger.info("D-Bus interface \(Self.interface) at \(Self.objectPath) on the session bus as \(Self.name)")
        return true
    }

    /// Stops answering and lets the name go (calls still running get an error from the bus).
    public func stop() async {
        activity.listen(nil)
        changed.finish()
        await announcer.withLock { $0 }?.value
        await connection.exchange(nil)?.stop()
    }

    /// Emits `StateChanged` when `domain`'s state is not the one last announced.
    private func announce(_ domain: String) async {
        let manager = self.manager
        guard let record = try? await manager.blocking({ () throws(FileProviderError) in try manager.domain(named: domain) }) else {
            return
        }
        let state = DomainSyncState.of(record, activity: activity).state.rawValue
        let isNew = announced.withLock { announced in
            defer { announced[domain] = state }
            return announced[domain] != state
        }
        if isNew { connection.withLock { $0 }?.emit("StateChanged", domain, state) }
    }

    // MARK: Calls

    /// Keeps a call of the interface and answers it from a task; `false` for a member the
    /// interface does not have. On the bus thread: never blocks.
    private func handle(_ call: BusConnection.Call, on connection: BusConnection) -> Bool {
        guard call.member == "ListDomains" || PathMethod(rawValue: call.member) != nil else { return false }
        Task { [self] in
            switch await answer(call) {
            case .success(let value): connection.reply(call, value)
            case .failure(let failure): connection.fail(call, name: failure.name, message: failure.message)
            }
        }
        return true
    }

    /// A D-Bus error to answer with.
    struct Failure: Error {
        var name: String
        var message: String
    }

    private func answer(_ call: BusConnection.Call) async -> Result<String, Failure> {
        do {
            guard let method = PathMethod(rawValue: call.member) else { return .success(try await listDomains()) }
            guard let argument = call.argument, method.takesRecursive || call.flag == nil else {
                let takes =
                    method.takesRecursive
                    ? "a string and a boolean: an absolute path in a served domain and whether to go into its folders"
                    : "one string: an absolute path in a served domain"
                return .failure(Failure(name: BusErrorName.invalidArgs, message: "\(call.member) takes \(takes)"))
            }
            let location = try await resolve(argument)
            return try await run(method, at: location, recursive: call.flag ?? false)
        } catch let failure as Failure {
            return .failure(failure)
        } catch {
            let error = FileProviderError.wrap(error)
            return .failure(Failure(name: BusErrorName.of(error.code), message: error.message))
        }
    }

    /// The served domains and their states (the `ListDomains` reply).
    /// - Throws: `localIOFailure` when the database fails.
    private func listDomains() async throws -> String {
        let (manager, domains, activity) = (self.manager, self.domains, self.activity)
        let reports = try await manager.blocking { () throws(FileProviderError) -> [DomainStateReport] in
            var reports: [DomainStateReport] = []
            for name in domains {
                let record = try manager.domain(named: name)
                let (state, detail) = DomainSyncState.of(record, activity: activity)
                reports.append(
                    DomainStateReport(
                        name: name, backend: record.backendKind, mode: record.replicaMode.rawValue, replica: record.replicaPath,
                        state: state.rawValue, detail: detail, lastSyncAt: record.lastSyncAt))
            }
            return reports
        }
        return try JSONText.text(reports)
    }

    /// The item at `argument`, an absolute path inside the replica of a served domain (or its
    /// backing folder), resolved as the CLI resolves paths.
    /// - Throws: ``Failure`` with ``BusErrorName/outsideDomains`` for a relative path or a path
    ///   outside every served domain; the CLI's errors otherwise (`invalidArgument` for `..`).
    private func resolve(_ argument: String) async throws -> ItemLocation {
        guard argument.hasPrefix("/") else {
            throw Failure(
                name: BusErrorName.outsideDomains,
                message: "\(TerminalText.quoted(argument)) is not an absolute path; give the path of a file in a served domain's replica")
        }
        let (manager, domains) = (self.manager, self.domains)
        let location = try await manager.blocking { () throws(FileProviderError) -> ItemLocation? in
            let absolute = URL(fileURLWithPath: argument).standardizedFileURL.path
            // Only the served domains' folders: never another domain of the same database.
            var inside = false
            for name in domains {
                let record = try manager.domain(named: name)
                let roots = [record.replicaPath] + [try? manager.backingURL(of: record)].compactMap { $0??.path }
                if roots.contains(where: { absolute == $0 || absolute.hasPrefix($0 + "/") }) { inside = true }
            }
            return inside ? try manager.resolve(argument) : nil
        }
        guard let location, domains.contains(location.domain) else {
            throw Failure(
                name: BusErrorName.outsideDomains,
                message:
                    "\(TerminalText.quoted(argument)) is not inside the replica of a domain this serve serves (\(domains.joined(separator: ", ")))"
            )
        }
        return location
    }

    /// Runs `method` on the item at `location` as the CLI's command does (with `-R` when
    /// `recursive`: `materialize` and `evict` only).
    /// - Throws: what the CLI's command fails with before any item (the domain cannot be opened,
    ///   `why` finds nothing); ``Failure`` when an item failed (the CLI exits 1).
    private func run(_ method: PathMethod, at location: ItemLocation, recursive: Bool) async throws -> Result<String, Failure> {
        if method == .why {
            let manager = self.manager
            let explanation = try await manager.blocking { () throws(FileProviderError) in try manager.explain(location) }
            return .success(try JSONText.text(explanation))
        }
        let controller = try await manager.controller(for: location.domain)
        let outcomes: [ItemOutcome]
        switch method {
        case .materialize: outcomes = await controller.materialize(paths: [location.path], recursive: recursive)
        case .evict: outcomes = await controller.evict(paths: [location.path], recursive: recursive)
        case .pin: outcomes = await controller.pin(paths: [location.path])
        case .unpin: outcomes = await controller.unpin(paths: [location.path]).outcomes
        case .why: outcomes = []
        }
        let failed = outcomes.filter { $0.error != nil }
        if let first = failed.first?.error {
            // As the CLI's error lines: one per failed item (the first ones).
            var lines = failed.prefix(10).map { $0.message ?? $0.path }
            if failed.count > 10 { lines.append("\(failed.count - 10) more items failed") }
            return .failure(Failure(name: BusErrorName.of(first.code), message: lines.joined(separator: "\n")))
        }
        return .success(try JSONText.text(outcomes.map { BusOutcome(path: $0.path, ok: true, error: nil, code: nil) }))
    }
}
