import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderSystem

/// How `serve` runs its domains.
public struct ServeOptions: Sendable {
    /// Seconds between polls of a store for remote changes.
    public var pollInterval: Double
    /// Poll intervals of single domains, by name (override ``pollInterval``).
    public var pollIntervals: [String: Double]
    /// A file changed more recently than this many seconds is still being written: it is
    /// uploaded by a later sync, scheduled once this time has passed.
    public var settleSeconds: Double
    /// Quiet time after the last local change before a sync starts, in seconds.
    public var debounceSeconds: Double
    /// The longest a sync waits for local changes to stop, in seconds.
    public var maximumDebounceSeconds: Double
    /// Seconds between passes of automatic eviction (there is one after each sync too).
    public var evictionInterval: Double
    /// Seconds between syncs that compare the whole replica although inotify reported every
    /// change (the others compare only the folders that changed): a safety net.
    public var fullScanInterval: Double
    /// Whether each domain's remaining dataless folders are populated in the background once
    /// its first sync is done, while nothing else is due (see ``BackgroundPopulation``).
    public var populateInBackground: Bool
    /// Where serve puts the freedesktop.org thumbnails of the dataless images and videos of the
    /// folders programs open (``FolderThumbnails``); `nil`: it makes none.
    public var thumbnailCache: URL?
    /// The most thumbnails one folder open makes (``FolderThumbnails/perOpenLimit``).
    public var thumbnailsPerOpen: Int

    public init(
        pollInterval: Double = 30, pollIntervals: [String: Double] = [:], settleSeconds: Double = 1, debounceSeconds: Double = 0.2,
        maximumDebounceSeconds: Double = 2, evictionInterval: Double = 5, fullScanInterval: Double = 3600,
        populateInBackground: Bool = true, thumbnailCache: URL? = nil, thumbnailsPerOpen: Int = FolderThumbnails.defaultPerOpenLimit
    ) {
        self.thumbnailCache = thumbnailCache
        self.thumbnailsPerOpen = thumbnailsPerOpen
        self.populateInBackground = populateInBackground
        self.fullScanInterval = fullScanInterval
        self.pollInterval = pollInterval
        self.pollIntervals = pollIntervals
        self.settleSeconds = settleSeconds
        self.debounceSeconds = debounceSeconds
        self.maximumDebounceSeconds = maximumDebounceSeconds
        self.evictionInterval = evictionInterval
    }

    /// The poll interval of a domain.
    public func pollInterval(of domain: String) -> Double { pollIntervals[domain] ?? pollInterval }
}

/// The long-running side of the engine, as Apple's `fileproviderd`: runs many domains in one
/// process. Per domain: inotify on every folder of the replica, a debounced
/// `sync(upload: true, settleSeconds:)` after local changes, a poll of the store every poll
/// interval or when signalled (``ProviderManager/signalServe(domain:)``), a re-check when a
/// file was still being written, and a pause while the domain backs off (``BackoffPolicy``),
/// after which it resumes by itself. One sync at a time per domain; domains run side by side.
///
/// ``run()`` returns after ``stop(force:)``: a graceful stop lets running syncs finish; a forced
/// stop cancels them (every store operation is journalled, so nothing is lost).
public final class Server: Sendable {
    public let manager: ProviderManager
    public let domains: [String]
    public let options: ServeOptions
    let logger: Logger
    private let wakeups: [String: Wakeup]
    /// The folders of each domain's replica that changed since its last sync (from inotify).
    private let changedFolders: [String: ChangedFolders]
    private let stopping = Mutex(false)
    private let work = Mutex<Task<Void, Never>?>(nil)
    private let syncCount = Mutex(0)
    /// Whether the index of names that `find -name` reads is still to be built (once per
    /// process, by the first domain with nothing else due after a sync).
    private let nameIndexDue = Mutex(true)
    /// What runs for the domains beside their loops: feeds, watchers, mounts, thumbnails.
    private let services: DomainServices
    /// Automatic eviction of the served domains (see ``Evictor``).
    private let eviction: EvictionLoop
    /// Which domains are syncing and how their last syncs ended (the D-Bus interface's states).
    public let activity = SyncActivity()

    /// A server for `domains` (names; each must exist).
    public init(manager: ProviderManager, domains: [String], options: ServeOptions = ServeOptions(), logger: Logger) {
        self.manager = manager
        self.domains = domains
        self.options = options
        self.logger = logger
        wakeups = Dictionary(uniqueKeysWithValues: domains.map { ($0, Wakeup()) })
        changedFolders = Dictionary(uniqueKeysWithValues: domains.map { ($0, ChangedFolders()) })
        eviction = EvictionLoop(manager: manager, domains: domains, interval: options.evictionInterval, logger: logger)
        services = DomainServices(manager: manager, options: options, logger: logger)
    }

    /// How many syncs have run (finished or failed) since the server started.
    public var completedSyncs: Int { syncCount.withLock { $0 } }

    /// Runs every domain until ``stop(force:)``; calls `ready` once every domain is watched and
    /// its loop is about to start (what a service manager waits for).
    ///
    /// - Throws: `providerDomainNotFound` for an unknown domain; `cannotSynchronize` when another
    ///   process serves one of the domains; `localIOFailure` when the lock files cannot be
    ///   written. Failures of single syncs are logged, recorded on the domain and retried; they
    ///   never end `run()`.
    public func run(ready: @Sendable () -> Void = {}) async throws(FileProviderError) {
        try await PoolCheck.during("serve") { () async throws(FileProviderError) in try await serving(ready: ready) }
    }

    private func serving(ready: @Sendable () -> Void) async throws(FileProviderError) {
        let (manager, domains) = (self.manager, self.domains)
        let records = try await manager.blocking { () throws(FileProviderError) -> [DomainRecord] in
            var records: [DomainRecord] = []
            for name in domains { records.append(try manager.domain(named: name)) }
            return records
        }
        var locks: [DomainLock] = []
        for name in domains { locks.append(try DomainLock.acquire(home: manager.home, domain: name)) }
        defer { _ = locks }
        try await services.start(records, wakeups: wakeups, changedFolders: changedFolders)
        logger.info(
            "serving \(domains.joined(separator: ", ")): poll every \(Self.seconds(options.pollInterval)), settle \(Self.seconds(options.settleSeconds))"
        )

        let task = Task { [self] in
            await withTaskGroup(of: Void.self) { group in
                for name in domains {
                    group.addTask { await self.runDomain(name) }
                }
                group.addTask { await self.eviction.run() }
            }
        }
        let alreadyStopping = work.withLock { work -> Bool in
            work = task
            return stopping.withLock { $0 }
        }
        if alreadyStopping { signalStop() } else { ready() }
        await task.value
        await services.stop()
        logger.info("stopped")
    }

    /// Stops serving. Graceful (`force` false): no new sync starts, running ones finish. Forced:
    /// running syncs are cancelled too. Any thread; may be called more than once.
    public func stop(force: Bool = false) {
        stopping.withLock { $0 = true }
        signalStop()
        if force { work.withLock { $0 }?.cancel() }
    }

    private func signalStop() {
        for wakeup in wakeups.values { wakeup.signal(.stop) }
        eviction.stop()
    }

    private var isStopping: Bool { stopping.withLock { $0 } }

    /// The record of the changes of a domain's replica its syncs take: its feed's, else what
    /// the watcher saw.
    private func changes(of name: String) -> ChangedFolders? {
        services.changes(of: name, watched: changedFolders[name])
    }

    // MARK: One domain

    /// The state of one domain's loop.
    private struct DomainState {
        var controller: DomainController?
        var localDirty = true
        var remoteDue = true
        var firstLocalChange: Date?
        var lastLocalChange: Date?
        var nextPoll = Date()
        var settleRecheck: Date?
        var retryNow = false
        /// When the next sync compares the whole replica (the first one does).
        var nextFullScan = Date()
        /// The domain was disconnected (and this was logged).
        var disconnected = false
        /// The domain's backend was not available (and this was logged).
        var backendMissing = false
        /// How many folders and dataless folders the domain had when its dataless folders were
        /// last marked (see ``watchDatalessFolders(of:)``).
        var markedFolders: [Int]?
        /// Whether dataless folders may be left to populate in the background: set after each
        /// sync, cleared when none is left or one failed (see ``BackgroundPopulation``).
        var populationDue = false
        /// How many folders the background population wrote since it last found none left.
        var populatedInBackground = 0
    }

    private func runDomain(_ name: String) async {
        guard let wakeup = wakeups[name] else { return }
        let interval = max(0.05, options.pollInterval(of: name))
        var state = DomainState()
        // A feed that records every change needs no periodic full comparison (its first sync
        // compares everything unless a clean stop left a record).
        if services.hasFeed(name) { state.nextFullScan = .distantFuture }
        while !isStopping && !Task.isCancelled {
            let now = Date()
            let reasons = wakeup.take()
            if reasons.contains(.stop) { break }
            if reasons.contains(.local) || reasons.contains(.overflow) {
                state.localDirty = true
                state.lastLocalChange = now
                if state.firstLocalChange == nil { state.firstLocalChange = now }
            }
            if reasons.contains(.remote) {
                state.remoteDue = true
                state.retryNow = true
            }
            if now >= state.nextPoll { state.remoteDue = true }
            if let recheck = state.settleRecheck, now >= recheck {
                state.settleRecheck = nil
                state.localDirty = true
            }

            // A disconnected domain syncs nothing until it is connected again: `domain connect`
            // signals serve; the next poll looks again too.
            let manager = self.manager
            if let record = try? await manager.blocking({ () throws(FileProviderError) in try manager.domain(named: name) }),
                !record.isConnected
            {
                if !state.disconnected {
                    state.disconnected = true
                    activity.changed(name)
                    logger.notice("\(name): disconnected; not synced until 'fileproviderctl domain connect \(name)'")
                }
                state.nextPoll = now.addingTimeInterval(interval)
                await wakeup.wait(until: state.nextPoll)
                continue
            } else if state.disconnected {
                state.disconnected = false
                activity.changed(name)
                state.remoteDue = true
                state.localDirty = true
                logger.notice("\(name): connected again; syncing")
            }

            // A backing-off domain waits (a signal retries at once).
            var backoff: DomainBackoff?
            do {
                backoff = try await manager.blocking { () throws(FileProviderError) in try manager.backoff(ofDomain: name) }
            } catch {
                logger.error("\(name): \(error.message)")
            }
            if let backoff, !state.retryNow {
                if backoff.isWaiting(at: now) {
                    await wakeup.wait(until: backoff.nextRetryAt)
                    continue
                }
                state.remoteDue = true
            }

            let debounced: Bool = {
                guard state.localDirty, let last = state.lastLocalChange, let first = state.firstLocalChange else {
                    return state.localDirty
                }
                return now.timeIntervalSince(last) >= options.debounceSeconds
                    || now.timeIntervalSince(first) >= options.maximumDebounceSeconds
            }()
            if state.remoteDue || (state.localDirty && debounced) {
                await syncOnce(name, state: &state, interval: interval)
                continue
            }

            var deadline = state.nextPoll
            if let recheck = state.settleRecheck { deadline = min(deadline, recheck) }
            if state.localDirty, let last = state.lastLocalChange, let first = state.firstLocalChange {
                deadline = min(
                    deadline, last.addingTimeInterval(options.debounceSeconds),
                    first.addingTimeInterval(options.maximumDebounceSeconds))
            }
            // Nothing else is due after a sync: the index the first `find -name` would build.
            if state.populationDue,
                nameIndexDue.withLock({ due in
                    defer { due = false }
                    return due
                })
            {
                await prepareNameSearch()
                continue
            }
            // Nothing else is due: a few dataless folders, stopping as soon as something is.
            if options.populateInBackground && state.populationDue, let controller = state.controller {
                await populateInBackground(controller, state: &state) { [deadline] in wakeup.isPending || Date() >= deadline }
                continue
            }
            await wakeup.wait(until: deadline)
        }
    }

    /// Builds the index of names that `find -name` reads, when the database lacks it
    /// (``MetadataStore/prepareNameSearch()``); a failure is logged, the first search tries again.
    private func prepareNameSearch() async {
        let store = manager.store
        let started = Date()
        do {
            if try await manager.blocking({ () throws(FileProviderError) in try store.prepareNameSearch() }) {
                logger.info(
                    "built the index of names for 'fileproviderctl find -name' in \(Self.seconds(Date().timeIntervalSince(started)))")
            }
        } catch {
            logger.warning("could not build the index of names for 'fileproviderctl find -name': \(error.message)")
        }
    }

    /// One step of the background population of a domain's dataless folders.
    private func populateInBackground(_ controller: DomainController, state: inout DomainState, otherWork: @escaping @Sendable () -> Bool)
        async
    {
        let name = controller.domain.name
        switch await BackgroundPopulation(manager: manager, logger: logger).step(controller, otherWork: otherWork) {
        case .more(let populated):
            state.populatedInBackground += populated
        case .done:
            state.populationDue = false
            if state.populatedInBackground > 0 {
                logger.info(
                    "\(name): populated \(state.populatedInBackground) dataless folders in the background; no dataless folder is left")
            }
            state.populatedInBackground = 0
        case .failed:
            state.populationDue = false
        }
    }

    private func syncOnce(_ name: String, state: inout DomainState, interval: Double) async {
        state.localDirty = false
        state.remoteDue = false
        state.retryNow = false
        state.firstLocalChange = nil
        state.lastLocalChange = nil
        activity.began(name)
        var outcome = SyncActivity.Outcome()
        defer {
            activity.ended(name, outcome)
            state.nextPoll = Date().addingTimeInterval(interval)
            syncCount.withLock { $0 += 1 }
            // A sync may have downloaded files: over a budget now?
            eviction.poke()
        }
        do {
            let controller: DomainController
            if let existing = state.controller {
                controller = existing
            } else {
                controller = try await manager.controller(for: name)
                state.controller = controller
                state.backendMissing = false
            }
            let logger = self.logger
            let changes = changes(of: name)
            if Date() >= state.nextFullScan {
                changes?.everythingChanged()
                state.nextFullScan = Date().addingTimeInterval(max(1, options.fullScanInterval))
            }
            let report = try await controller.sync(
                events: { event in
                    if case .waitingForSync(let process, _) = event {
                        logger.notice("\(name): waiting for \(process.map { "process \($0)" } ?? "another process") to finish its sync")
                    }
                }, upload: true, settleSeconds: options.settleSeconds, changes: changes)
            // Each notice before the pass's summary, which counts them: a reader (or a test)
            // that finds the summary finds its details above it.
            for notice in report.notices { logger.warning("\(notice)") }
            if report.isPartial {
                outcome = SyncActivity.Outcome(message: report.problemSummary, partial: true)
                // Synced in part: said at warning level, as `sync` exits 3 (`status` keeps it).
                logger.warning("\(name): \(Self.summary(report)); see 'fileproviderctl status \(name)'")
            } else {
                logger.info("\(name): \(Self.summary(report))")
            }
            // Only sync down makes folders dataless (this process's or another's, whose work
            // shows in the counters): a sync that changed nothing leaves the marks as they are
            // (reading every dataless folder of a large domain and marking each one again was
            // most of what an idle poll cost).
            let (store, domainID) = (manager.store, controller.domainID)
            let folders = (try? await manager.blocking { () throws(FileProviderError) in try store.summary(domainID: domainID) })
                .map { [$0.folders, $0.datalessFolders] }
            if report.added + report.updated + report.moved + report.deleted > 0 || folders == nil || folders != state.markedFolders {
                await services.watchDatalessFolders(of: controller.domain)
                state.markedFolders = folders
            }
            await services.refreshMount(of: name)
            state.populationDue = true
            if !report.pendingLocal.isEmpty {
                state.settleRecheck = Date().addingTimeInterval(options.settleSeconds + 0.05)
                logger.debug(
                    "\(name): \(report.pendingLocal.count) files still being written; checking again in \(Self.seconds(options.settleSeconds))"
                )
            }
        } catch where error.code == .backendNotAvailable {
            // Not a failure of the store: said once, nothing recorded; looked for at every poll.
            outcome = SyncActivity.Outcome(code: error.code, message: error.message)
            if !state.backendMissing { logger.warning("\(name): not synced: \(error.message)") }
            state.backendMissing = true
        } catch {
            outcome = SyncActivity.Outcome(code: error.code, message: error.message)
            var line = "\(name): sync failed: \(error.message)"
            let manager = self.manager
            if error.code.reaction == .backOffDomain,
                let backoff = try? await manager.blocking({ () throws(FileProviderError) in try manager.backoff(ofDomain: name) })
            {
                line +=
                    "; backing off until \(Self.clock(backoff.nextRetryAt)) after \(backoff.failureCount) failure\(backoff.failureCount == 1 ? "" : "s")"
            }
            logger.error("\(line)")
        }
    }

    // MARK: Formatting

    /// One log line of counts.
    static func summary(_ report: SyncReport) -> String {
        var text = "\(report.uploaded) sent, \(report.conflicts) conflicts; \(report.listedItems) listed, \(report.added) added, "
        text += "\(report.updated) updated, \(report.moved) moved, \(report.deleted) deleted, \(report.downloaded) downloaded"
        text += "; compared \(report.comparedWholeReplica ? "the whole replica, " : "")\(report.localFoldersCompared) local folder"
        text += report.localFoldersCompared == 1 ? "" : "s"
        if !report.pendingLocal.isEmpty { text += ", \(report.pendingLocal.count) still being written" }
        if let problems = report.problemSummary { text += ", \(problems)" }
        if !report.notices.isEmpty { text += ", \(report.notices.count) notices" }
        return text + " in \(String(format: "%.2f", report.seconds)) s"
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : String(format: "%.2g s", value)
    }

    /// `HH:MM:SS` in local time.
    static func clock(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: date)
    }
}
