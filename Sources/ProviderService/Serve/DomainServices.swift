import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderSystem

/// What `serve` runs for its domains beside their sync loops (``Server``): the FUSE domains'
/// change feeds, the population of dataless folders on open (``DatalessWatcher``), the
/// on-access handler of the fanotify domains (``OnAccessHandler``), the thumbnails of the
/// folders programs open (``FolderThumbnails``), the FUSE mounts (``FUSEReplicaMount``), the
/// folder-open notifier (``FolderOpenNotifier``) and the inotify watcher (``ServeWatcher``).
///
/// ``start(_:wakeups:changedFolders:)`` starts them in that order, each once the ones it relies
/// on run (dataless folders are marked before a replica is mounted, so a program that opens
/// one the moment the mount appears is held until it is filled; the thumbnails run before the
/// mounts and the notifier that tell them of opens), and records each part as it starts.
/// ``stop()`` stops the parts started, in the reverse order, whatever failed: a part is started
/// and stopped in one place, so none is stopped twice or forgotten (the feeds are kept for the
/// next `serve` last, once the mounts are gone; the dataless folders' marks go after the mounts
/// and the on-access handler, so a program that opens a folder meanwhile is held until it is
/// filled, and none waits on a folder nobody fills).
final class DomainServices: Sendable {
    let manager: ProviderManager
    let logger: Logger
    /// The settle time of the syncs the on-access handler starts for moved files.
    private let settleSeconds: Double
    /// Thumbnails of the folders programs open; `nil` when turned off.
    private let thumbnails: FolderThumbnails?
    /// The parts started, in order, each with how it stops.
    private let parts = Mutex<[(name: String, stop: @Sendable () async -> Void)]>([])
    /// The change feeds of the domains whose layout records every change
    /// (``ReplicaLayout/recordsLocalChanges``: FUSE), by name: their syncs take the changed
    /// folders from these, not from inotify, and no watcher looks at their backing folders.
    private let feeds = Mutex<[String: ReplicaChangeFeed]>([:])
    /// Populates dataless folders when programs open them; `nil` without fanotify.
    private let datalessWatcher = Mutex<DatalessWatcher?>(nil)
    /// Fetches the files of fanotify domains when programs access them; `nil` when none is served.
    private let onAccess = Mutex<OnAccessHandler?>(nil)
    /// The FUSE domains' mounts.
    private let fuseMounts = Mutex<[FUSEReplicaMount]>([])

    init(manager: ProviderManager, options: ServeOptions, logger: Logger) {
        self.manager = manager
        self.logger = logger
        settleSeconds = options.settleSeconds
        thumbnails = options.thumbnailCache.map {
            FolderThumbnails(manager: manager, cacheHome: $0, perOpenLimit: options.thumbnailsPerOpen, logger: logger)
        }
    }

    /// Starts every part for `records` (see the type); `wakeups` and `changedFolders` are the
    /// domains' loops', by name.
    /// - Throws: why a dataless domain cannot be served (see ``startOnAccess(_:changedFolders:)``
    ///   and ``FUSEReplicaMount/mountAll(_:manager:feeds:logger:folderOpened:)``); the parts
    ///   started before are stopped again.
    func start(_ records: [DomainRecord], wakeups: [String: Wakeup], changedFolders: [String: ChangedFolders])
        async throws(FileProviderError)
    {
        do {
            await startFeeds(records, wakeups: wakeups)
            startPopulatingOnOpen(records)
            for record in records { await watchDatalessFolders(of: record) }
            try await startOnAccess(records, changedFolders: changedFolders)
            if let thumbnails {
                thumbnails.start()
                started("thumbnails") { await thumbnails.stop() }
            }
            try await mountFUSE(records)
            startFolderOpens(records)
            try await startWatcher(records, wakeups: wakeups, changedFolders: changedFolders)
        } catch {
            await stop()
            throw error
        }
    }

    /// Stops the parts started, the last one first; returns once all have stopped.
    func stop() async {
        while let part = parts.withLock({ $0.popLast() }) {
            logger.debug("stopping the \(part.name)")
            await part.stop()
        }
    }

    private func started(_ name: String, stop: @escaping @Sendable () async -> Void) {
        parts.withLock { $0.append((name, stop)) }
    }

    // MARK: What the domains' loops ask

    /// The record of the changes of a domain's replica its syncs take: its feed's, else
    /// `watched` (what the watcher saw).
    func changes(of name: String, watched: ChangedFolders?) -> ChangedFolders? {
        feeds.withLock { $0[name] }?.changes ?? watched
    }

    /// Whether the domain's layout records its changes in a feed (then no periodic full
    /// comparison is needed).
    func hasFeed(_ name: String) -> Bool { feeds.withLock { $0[name] } != nil }

    /// Tells the kernel through the domain's FUSE mount, if it has one, what the engine changed
    /// (``FUSEReplicaMount/refresh()``).
    func refreshMount(of name: String) async {
        await fuseMounts.withLock { $0 }.first { $0.domain == name }?.refresh()
    }

    /// Whether the engine itself is writing the file at `path` (relative) of `domain`: a fill on
    /// access, through fanotify or a FUSE mount.
    func isFilling(domain: String, path: String) -> Bool {
        onAccess.withLock { $0 }?.isFilling(domain: domain, path: path) ?? false
            || fuseMounts.withLock { $0 }.contains { $0.domain == domain && $0.isFilling(path) }
    }

    // MARK: Change feeds

    /// Takes the change feeds the last clean stop left for the domains whose layout records
    /// every change (``ReplicaChangeFeed/restore(home:domain:domainID:)``: without one, the
    /// first sync compares the whole replica), and wires each to its domain's loop (a change
    /// wakes it) and to its controller's finished writes. Stopping writes what each holds that
    /// was not sent, for the next `serve`: after the mounts are gone and no sync runs.
    private func startFeeds(_ records: [DomainRecord], wakeups: [String: Wakeup]) async {
        let manager = self.manager
        for record in records where ReplicaLayouts.layout(of: record).recordsLocalChanges {
            guard let id = record.id, let wakeup = wakeups[record.name] else { continue }
            let name = record.name
            let feed =
                (try? await manager.blocking { ReplicaChangeFeed.restore(home: manager.home, domain: name, domainID: id) })
                ?? ReplicaChangeFeed()
            feed.onChange { wakeup.signal(.local) }
            feed.sendFinishedWrites { manager.loadedController(for: name)?.finishedWrites }
            logger.info(
                "\(name): local changes recorded as programs make them through the mount; \(feed.isTrusted ? "the first sync compares only the folders changed before the last stop" : "the first sync compares the whole replica once (no record of a clean stop)")"
            )
            feeds.withLock { $0[name] = feed }
        }
        let ids = Dictionary(records.compactMap { record in record.id.map { (record.name, $0) } }, uniquingKeysWith: { first, _ in first })
        started("change feeds") { [self] in await keepFeeds(ids) }
    }

    /// Writes what each feed holds that was not sent, for the next `serve`.
    private func keepFeeds(_ ids: [String: Int64]) async {
        let manager = self.manager
        for (name, feed) in feeds.withLock({ $0 }) {
            guard let id = ids[name] else { continue }
            do {
                try await manager.blocking { () throws(FileProviderError) in try feed.save(home: manager.home, domain: name, domainID: id) }
            } catch {
                logger.warning("\(error.message); the next serve compares the whole replica once")
            }
        }
    }

    // MARK: Dataless folders

    /// Starts populating dataless folders when they are opened (see ``DatalessWatcher``), and
    /// marking those a sync makes as it makes them (``ProviderManager/newDatalessFolders``).
    /// Without `CAP_SYS_ADMIN` logs why not.
    private func startPopulatingOnOpen(_ records: [DomainRecord]) {
        let watcher: DatalessWatcher
        do {
            watcher = try DatalessWatcher(
                populate: { [manager, logger] domain, path in
                    guard let controller = try? await manager.controller(for: domain) else { return false }
                    var worked = true
                    for outcome in await controller.populate(paths: [path], recursive: false) {
                        if let error = outcome.error {
                            logger.warning("\(TerminalText.quoted(outcome.path)): not populated: \(error.message)")
                            worked = false
                        }
                    }
                    // Its subfolders are dataless: the population had them marked as it made
                    // them (NewDatalessFolders), so opening one populates it in turn.
                    return worked
                }, logger: logger)
        } catch {
            logger.notice("\(error.message)")
            return
        }
        watcher.start()
        datalessWatcher.withLock { $0 = watcher }
        // The folders a sync makes dataless are marked as it makes them, not after it.
        let listedFromDatabase = Set(records.filter { ReplicaLayouts.layout(of: $0).listsDatalessFoldersFromDatabase }.map(\.name))
        manager.newDatalessFolders.listen { domain, paths, dataless in
            guard !listedFromDatabase.contains(domain) else { return }
            if dataless { watcher.mark(domain: domain, folders: paths) } else { watcher.unmark(domain: domain, folders: paths) }
        }
        started("dataless folders") { [manager] in
            manager.newDatalessFolders.listen(nil)
            await watcher.stop()
        }
    }

    /// Marks a domain's dataless folders, so opening one populates it. Not a FUSE domain's: its
    /// mount lists them from the database, and writes them only when a program needs their
    /// entries (Docs/FUSE.md).
    func watchDatalessFolders(of domain: DomainRecord) async {
        guard let watcher = datalessWatcher.withLock({ $0 }), let id = domain.id,
            !ReplicaLayouts.layout(of: domain).listsDatalessFoldersFromDatabase
        else { return }
        do {
            let store = manager.store
            let folders = try await manager.blocking { () throws(FileProviderError) in try store.datalessFolderPaths(domainID: id) }
            // Marked where the engine writes them; programs open them at the replica path,
            // which is another path to the same folders when the replica is a mount of them.
            let root = try manager.replicaRoot(of: domain).path
            watcher.watch(domain: domain.name, root: root, seenAt: [domain.replicaPath], datalessFolders: folders)
        } catch {
            logger.warning("\(domain.name): \(error.message)")
        }
    }

    // MARK: On-access files

    /// Mounts every fanotify domain's files at its replica path and starts answering programs'
    /// accesses (see ``OnAccessHandler``).
    /// - Throws: why a dataless domain cannot be served (no CAP_SYS_ADMIN, a file system that
    ///   refuses the marks, a replica folder that is not empty); mounts made before are taken
    ///   away again.
    private func startOnAccess(_ records: [DomainRecord], changedFolders: [String: ChangedFolders]) async throws(FileProviderError) {
        let dataless = records.filter { ReplicaLayouts.layout(of: $0).isGuardedOnAccess }
        guard !dataless.isEmpty else { return }
        let settle = settleSeconds
        let handler = try OnAccessHandler.open(manager: manager, logger: logger) { [manager, logger] name, path in
            do {
                let controller = try await manager.controller(for: name)
                // The engine's own writes there were not reported (a fill, a file completed
                // around a program's write): the folder is compared whatever the watcher saw.
                changedFolders[name]?.folderChanged(RelativePath(path).parent)
                _ = try await controller.sync(upload: true, settleSeconds: settle, changes: changedFolders[name])
            } catch {
                logger.warning("\(name): sync for a moved file failed: \(FileProviderError.wrap(error).message)")
            }
        }
        for record in dataless {
            let ranged = (try? await manager.controller(for: record.name))?.backend.capabilities.supportsRangedReads ?? false
            do { try handler.serve(record, ranged: ranged) } catch {
                await handler.stop()
                throw FileProviderError(error.code, "cannot serve \(record.name)'s files on access: \(error.message)")
            }
        }
        handler.start()
        onAccess.withLock { $0 = handler }
        started("on-access handler") { await handler.stop() }
    }

    /// Mounts the FUSE domains (``FUSEReplicaMount/mountAll(_:manager:feeds:logger:folderOpened:)``),
    /// telling ``thumbnails`` of the folders programs open there.
    /// - Throws: what `mountAll` throws (the mounts made are taken away again).
    private func mountFUSE(_ records: [DomainRecord]) async throws(FileProviderError) {
        var opened: FUSEReplicaMount.FolderOpened?
        if let thumbnails {
            opened = { domain, path, process, user in thumbnails.opened(domain: domain, path: path, process: process, user: user) }
        }
        let mounts = try await FUSEReplicaMount.mountAll(
            records, manager: manager, feeds: feeds.withLock { $0 }, logger: logger, folderOpened: opened)
        if mounts.isEmpty { return }
        fuseMounts.withLock { $0 = mounts }
        started("FUSE mounts") { [fuseMounts] in await FUSEReplicaMount.unmountAll(fuseMounts.exchange([])) }
    }

    /// Starts telling ``thumbnails`` of the folders programs open in the fanotify domains'
    /// replicas (the FUSE mounts tell it themselves); without `CAP_SYS_ADMIN` logs why not.
    private func startFolderOpens(_ records: [DomainRecord]) {
        let guarded = records.filter { ReplicaLayouts.layout(of: $0).isGuardedOnAccess }
        guard let thumbnails, !guarded.isEmpty else { return }
        do {
            let notifier = try FolderOpenNotifier(thumbnails: thumbnails, logger: logger)
            for record in guarded { notifier.watch(domain: record.name, replicaPath: record.replicaPath) }
            notifier.start()
            started("folder-open notifier") { await notifier.stop() }
        } catch {
            logger.notice("no thumbnails for the folders programs open: \(error.message)")
        }
    }

    // MARK: Local changes

    /// Starts watching the replicas with inotify (``ServeWatcher``); without it, logs that
    /// local changes are found by polling only.
    ///
    /// A domain whose layout records its changes (FUSE) is watched only to hear of what other
    /// processes' engines change in its backing folder (an eviction, a download, a sync by
    /// `fileproviderctl`): the sync that wakes tells the kernel through the mount
    /// (``FUSEReplicaMount/refresh()``). What its syncs compare comes from its feed alone, and
    /// its mount records the programs' opens and finished writes itself.
    /// - Throws: `localIOFailure` when a domain's replica root cannot be worked out.
    private func startWatcher(_ records: [DomainRecord], wakeups: [String: Wakeup], changedFolders: [String: ChangedFolders])
        async throws(FileProviderError)
    {
        let manager = self.manager
        // A dataless domain's files are in its backing folder: the engine watches and writes
        // there, never through the replica path (which the on-access handler marks).
        var roots: [String: String] = [:]
        for record in records { roots[record.name] = try manager.replicaRoot(of: record).standardizedFileURL.path }
        let fed = feeds.withLock { Set($0.keys) }
        let targets = records.compactMap { record -> ServeWatcher.Target? in
            let name = record.name
            let id = record.id ?? 0
            guard let wakeup = wakeups[name] else { return nil }
            // A dataless domain's programs open its files through the replica path, which the
            // on-access handler sees (FAN_OPEN); opens in its backing folder are the engine's
            // own (a range flushed, an eviction's lease) and would make a file look recently used.
            let opened: @Sendable (String) -> Void
            if ReplicaLayouts.layout(of: record).isGuardedOnAccess || fed.contains(name) {
                opened = { _ in }
            } else {
                opened = { path in manager.useRecorder.used(domainID: id, path: path) }
            }
            return ServeWatcher.Target(
                domain: name, root: roots[name] ?? record.replicaPath,
                ignore: IgnoreRules(extra: record.ignoreList), wakeup: wakeup,
                writes: { path, modificationNanos in
                    guard !fed.contains(name), let writes = manager.loadedController(for: name)?.finishedWrites else { return }
                    if let modificationNanos { writes.finished(path, modificationNanos: modificationNanos) } else { writes.writing(path) }
                },
                isEngineWriting: { [self] path in isFilling(domain: name, path: path) },
                opened: opened, changes: fed.contains(name) ? ChangedFolders() : changedFolders[name] ?? ChangedFolders())
        }
        let watcher: ServeWatcher
        do {
            watcher = try ServeWatcher(targets: targets, signalsFolder: manager.home.appendingPathComponent("signals").path, logger: logger)
        } catch {
            logger.warning("\(error.message); local changes are found by polling only")
            for changes in changedFolders.values { changes.watchesIncomplete() }
            return
        }
        await watcher.start()
        started("inotify watcher") { await watcher.stop() }
    }
}
