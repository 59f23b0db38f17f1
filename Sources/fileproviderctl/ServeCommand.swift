import ArgumentParser
import Dispatch
import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderService

#if canImport(Glibc)
    import Glibc
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Keep domains in sync continuously: watch replicas, poll stores, back off on outages.",
        discussion: """
            Runs every connected domain (or the named ones; a disconnected one is skipped, and one \
            disconnected while served is paused until it is connected again; one whose backend is \
            not available here is skipped with a warning) in one process until SIGTERM or \
            SIGINT. Local changes are seen with inotify and synced after a short quiet time; a \
            file still being written is uploaded once it has not changed for --settle seconds. \
            Each store is polled every --poll-interval seconds, and at once after \
            'fileproviderctl signal DOMAIN'. When a store cannot be reached, refuses the \
            credentials or is full, the domain backs off (5 s doubling up to 5 min, with jitter; \
            see 'fileproviderctl status') and resumes by itself. One sync at a time per domain. \
            The first SIGTERM/SIGINT lets running syncs finish, a second one cancels them; \
            the exit status is 0. Logs go to standard error, one line per sync; under systemd \
            (fileproviderctl-serve.service) with journald priorities and without timestamps, \
            and serve reports readiness and watchdog pings through $NOTIFY_SOCKET. \
            Automatic eviction runs after each sync and every --eviction-interval seconds: the \
            least recently used files go while a domain is over its budget (see 'domain set', \
            'cache'); each eviction is logged with its reason. \
            A program that opens a dataless folder waits until serve has written the folder's \
            items (fanotify; needs root or CAP_SYS_ADMIN, else only 'fileproviderctl populate' \
            populates folders). Once a domain's first sync is done, serve also writes its \
            remaining dataless folders in the background, nearest the root first, a few at a time \
            whenever nothing else is due, so a path used by name (no event tells serve about it) \
            works in every folder once serve has caught up; 'fileproviderctl status' says how many \
            are left. --no-populate-in-background turns this off. \
            On the D-Bus session bus serve offers org.fileproviderkit.FileProvider1 (the \
            domains' states; materialize, evict, pin, unpin and why for a path: 'D-Bus interface' in \
            CLI.md); without a session bus it logs one line and runs without it; --no-dbus turns \
            it off. \
            When a program opens a folder of a dataless domain whose store makes thumbnails, serve \
            puts thumbnails of the folder's images and videos that are not downloaded where \
            file managers look ($XDG_CACHE_HOME/thumbnails, default ~/.cache; the freedesktop.org \
            standard), made from the store's thumbnails, never by downloading the files: at most \
            200 per folder open, 8 folders waiting, one at a time; not for programs an access \
            rule limits, nor other users' ('Thumbnails' in CLI.md). --no-thumbnails turns this off.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Domains to serve (default: every connected domain).", completion: .domainNames)
    var names: [String] = []

    @Option(help: ArgumentHelp("Seconds between polls of each store.", valueName: "seconds"))
    var pollInterval: Double = 30

    @Option(
        name: .customLong("domain-poll-interval"),
        help: ArgumentHelp("A domain's own poll interval, as DOMAIN=SECONDS (repeatable).", valueName: "domain=seconds"))
    var domainPollIntervals: [String] = []

    @Option(help: ArgumentHelp("Seconds a file must stay unchanged before it is uploaded.", valueName: "seconds"))
    var settle: Double = 1

    @Option(help: ArgumentHelp("Seconds between passes of automatic eviction (there is one after each sync too).", valueName: "seconds"))
    var evictionInterval: Double = 5

    @Option(
        help: ArgumentHelp(
            "Seconds between syncs that compare the whole replica (the others compare only the folders inotify saw change).",
            valueName: "seconds"))
    var fullScanInterval: Double = 3600

    @Flag(
        name: .customLong("populate-in-background"), inversion: .prefixedNo,
        help: "Write every domain's remaining dataless folders in the background once its first sync is done.")
    var populateInBackground = true

    @Flag(
        name: .customLong("dbus"), inversion: .prefixedNo,
        help: "Offer the D-Bus interface on the session bus (org.fileproviderkit.FileProvider1; see 'D-Bus interface' in CLI.md).")
    var dbus = true

    @Flag(
        name: .customLong("thumbnails"), inversion: .prefixedNo,
        help:
            "Make file managers' thumbnails of the dataless images and videos in folders programs open (dataless domains whose store makes thumbnails)."
    )
    var thumbnails = true

    /// The log level: `--log-level`, `-v` or `-q` (``GlobalOptions/logLevel(default:)``), else info.
    var logLevel: String { global.logLevel(default: .info).rawValue }

    /// The longest any of serve's intervals may be: a year. Longer ones overflow the
    /// nanoseconds serve counts in (about 292 years).
    static let longestSeconds: Double = 365 * 86_400

    func validate() throws {
        func check(_ value: Double, _ option: String, zero: Bool = false) throws {
            guard value.isFinite, zero ? value >= 0 : value > 0, value <= Self.longestSeconds else {
                let range = zero ? "0 to" : "more than 0 and at most"
                throw ValidationError("\(option) takes \(range) \(Int(Self.longestSeconds)) seconds (a year), not \(value)")
            }
        }
        try check(pollInterval, "--poll-interval")
        try check(settle, "--settle", zero: true)
        try check(evictionInterval, "--eviction-interval")
        try check(fullScanInterval, "--full-scan-interval")
        _ = try parsedPollIntervals()
    }

    func parsedPollIntervals() throws -> [String: Double] {
        var result: [String: Double] = [:]
        for value in domainPollIntervals {
            guard let equals = value.lastIndex(of: "="), let seconds = Double(value[value.index(after: equals)...]), seconds > 0,
                seconds.isFinite, seconds <= Self.longestSeconds
            else {
                throw ValidationError(
                    "--domain-poll-interval takes DOMAIN=SECONDS, more than 0 and at most \(Int(Self.longestSeconds)) seconds (a year), not '\(value)'"
                )
            }
            result[String(value[..<equals])] = seconds
        }
        return result
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        try LogSetup.bootstrap(level: level, file: global.logFile)
        var logger = Logger(label: "fileprovider.serve")
        logger.logLevel = level
        let notifier = ServiceNotifier()

        // SIGTERM/SIGINT (watched from the start by ``Interruption``, so a signal while the
        // database opens still ends in a clean exit): the first stops gracefully, the next
        // cancels running syncs; the exit status stays 0.
        let stopper = Stopper()
        Interruption.shared.takeOver { [logger] _, _ in
            notifier.stopping(status: "stopping")
            if stopper.signal() == 1 {
                logger.info("stopping: letting running syncs finish (send the signal again to cancel them)")
            } else {
                logger.info("stopping now: cancelling running syncs")
            }
        }

        let manager = try global.manager()
        let candidates = names.isEmpty ? try manager.domains() : try names.map { try manager.domain(named: $0) }
        await AdapterList.describeExternal(of: candidates)
        let domains = candidates.filter { $0.isConnected && manager.isBackendAvailable(for: $0) }.map(\.name)
        for domain in candidates where !domain.isConnected {
            logger.notice(
                "not serving \(domain.name): it is disconnected ('fileproviderctl domain connect \(domain.name)', then start serve again)")
        }
        for domain in candidates where domain.isConnected && !manager.isBackendAvailable(for: domain) {
            logger.warning("not serving \(domain.name): backend '\(domain.backendKind)' not available")
        }
        let intervals = try parsedPollIntervals()
        for name in intervals.keys where !domains.contains(name) {
            throw FileProviderError(.invalidArgument, "--domain-poll-interval names '\(name)', which is not served")
        }
        if domains.isEmpty {
            await manager.close()
            Output.error(
                candidates.isEmpty
                    ? "no connected domains to serve; add one with 'fileproviderctl domain add'"
                    : candidates.contains(where: \.isConnected)
                        ? "no domain to serve: the backends of the connected domains are not available"
                        : "no connected domains to serve; connect one with 'fileproviderctl domain connect NAME'")
            throw CommandFailure()
        }
        let server = Server(
            manager: manager, domains: domains,
            options: ServeOptions(
                pollInterval: pollInterval, pollIntervals: intervals, settleSeconds: settle, evictionInterval: evictionInterval,
                fullScanInterval: fullScanInterval, populateInBackground: populateInBackground,
                thumbnailCache: thumbnails ? FolderThumbnails.defaultCacheHome() : nil),
            logger: logger.escapingText())
        stopper.attach(server)
        let bus = dbus ? FileProviderBus(manager: manager, domains: domains, activity: server.activity, logger: logger.escapingText()) : nil
        await bus?.start()

        do {
            try await server.run {
                notifier.ready(status: "serving \(domains.joined(separator: ", "))")
                notifier.startWatchdog()
            }
        } catch {
            notifier.stopWatchdog()
            await bus?.stop()
            await manager.close()
            throw error
        }
        notifier.stopWatchdog()
        await bus?.stop()
        await manager.close()
    }
}

/// Counts stop signals and passes them to the server, also to one attached after they came.
private final class Stopper: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var server: Server?

    /// Records a signal and stops the server if there is one (forced from the second signal on);
    /// returns how many signals came.
    func signal() -> Int {
        lock.withLock {
            count += 1
            server?.stop(force: count > 1)
            return count
        }
    }

    /// The server to stop; stopped at once when signals came before it existed.
    func attach(_ server: Server) {
        lock.withLock {
            self.server = server
            if count > 0 { server.stop(force: count > 1) }
        }
    }
}
