import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What woke a domain's serve loop; several reasons coalesce into one set.
struct ServeWake: OptionSet, Sendable, Hashable {
    let rawValue: Int
    /// Something changed in the replica.
    static let local = ServeWake(rawValue: 1)
    /// `fileproviderctl signal`: poll the store now.
    static let remote = ServeWake(rawValue: 2)
    /// The kernel dropped events: scan everything.
    static let overflow = ServeWake(rawValue: 4)
    /// A deadline passed (poll interval, settle time, debounce, backoff).
    static let timer = ServeWake(rawValue: 8)
    /// Shut down.
    static let stop = ServeWake(rawValue: 16)
}

/// A wake-up flag one task waits on and any thread sets.
final class Wakeup: Sendable {
    private let state = Mutex<(reasons: ServeWake, waiter: CheckedContinuation<Void, Never>?)>(([], nil))

    /// Adds reasons and resumes the waiting task, if any. Any thread.
    func signal(_ reasons: ServeWake) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.reasons.formUnion(reasons)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Whether a reason is pending (without taking it). Any thread.
    var isPending: Bool { state.withLock { !$0.reasons.isEmpty } }

    /// Takes the reasons collected so far.
    func take() -> ServeWake {
        state.withLock { state in
            defer { state.reasons = [] }
            return state.reasons
        }
    }

    /// Returns when a reason is pending, `deadline` passed (adding `.timer`) or the task is
    /// cancelled (adding `.stop`). One task waits at a time.
    func wait(until deadline: Date?) async {
        let timer = deadline.map { deadline in
            Task { [self] in
                let nanos = max(0, deadline.timeIntervalSinceNow) * 1e9
                try? await Task.sleep(nanoseconds: UInt64(min(nanos, 1e15)))
                if !Task.isCancelled { signal(.timer) }
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if !state.reasons.isEmpty { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            signal(.stop)
        }
        timer?.cancel()
    }
}

/// Watches the replica folders of the served domains (every folder, recursively) and the
/// signals folder with one inotify descriptor, on a thread of its own, and tells each domain's
/// loop what happened.
///
/// The engine's own files are filtered out as far as practical: `.fp-tmp-*` temporary files,
/// ignored names, and placeholders being written (a placeholder removed or moved away still
/// counts: the user may have deleted or moved it). What gets through anyway (a downloaded file
/// renamed into place) only causes one sync that finds nothing to do.
final class ServeWatcher: @unchecked Sendable {
    struct Target: Sendable {
        var domain: String
        var root: String
        var ignore: IgnoreRules
        var wakeup: Wakeup
        /// Told, in the order of the events, when a file (relative path) was closed after writing
        /// or renamed into place (with its modification time then), or written again (`nil`).
        var writes: @Sendable (String, Int64?) -> Void = { _, _ in }
        /// Whether the engine itself is writing the file (relative path): its events are not
        /// a user's change (a dataless file being filled on access).
        var isEngineWriting: @Sendable (String) -> Bool = { _ in false }
        /// Told when a program opened a file (relative path), for least-recently-used
        /// eviction; an open changes nothing and does not wake the domain's loop.
        var opened: @Sendable (String) -> Void = { _ in }
        /// Told which folders changed, for the next sync to compare only those.
        var changes = ChangedFolders()
    }

    private let targets: [Target]
    private let signalsFolder: String
    private let logger: Logger
    private let inotify: Inotify
    private let stopRequested = Mutex(false)
    private let finished = Latch()
    /// Callers of ``catchUp()`` waiting for the thread to handle what is queued; `nil` once the
    /// thread has ended.
    private let catchingUp = Mutex<[CheckedContinuation<Bool, Never>]?>([])

    // Confined to the watcher thread.
    private var watches: [Int32: (target: Int, path: String)] = [:]
    private var signalsWatch: Int32 = -1
    private var warnedAboutLimit = false

    /// - Throws: `localIOFailure` when inotify cannot be started.
    init(targets: [Target], signalsFolder: String, logger: Logger) throws(FileProviderError) {
        self.targets = targets
        self.signalsFolder = signalsFolder
        self.logger = logger
        inotify = try Inotify()
    }

    /// Starts the thread; returns once every folder is watched, so a change made after this
    /// returns is seen.
    func start() async {
        await withCheckedContinuation { (ready: CheckedContinuation<Void, Never>) in
            let thread = Thread { [self] in
                ThreadName.setCurrent("fileprovider-inotify")
                setUp()
                ready.resume()
                loop()
                finished.open()
            }
            thread.name = "fileprovider-inotify"
            thread.stackSize = 1 << 20
            thread.start()
        }
        for target in targets { target.changes.watched { [weak self] in await self?.catchUp() ?? false } }
    }

    /// Returns once every event the kernel queued before this call has been handled (told to
    /// the targets' ``ChangedFolders``): a sync that takes the changed folders after this knows
    /// of every change made before it. `false` when the watcher has stopped.
    func catchUp() async -> Bool {
        await withCheckedContinuation { (caughtUp: CheckedContinuation<Bool, Never>) in
            let waiting = catchingUp.withLock { waiting -> Bool in
                guard waiting != nil else { return false }
                waiting!.append(caughtUp)
                return true
            }
            if waiting { inotify.wake() } else { caughtUp.resume(returning: false) }
        }
    }

    /// Stops the thread and waits until it has ended.
    func stop() async {
        stopRequested.withLock { $0 = true }
        inotify.wake()
        await finished.wait()
    }

    // MARK: The thread

    private func setUp() {
        do {
            try PrivateFolder.make(atPath: signalsFolder)
            signalsWatch = try inotify.addWatch(signalsFolder, mask: UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR))
        } catch {
            logger.warning("cannot watch the signals folder \(signalsFolder): \(error); 'fileproviderctl signal' will not work")
        }
        for index in targets.indices { watchTree(target: index, path: targets[index].root) }
        logger.debug("watching \(watches.count) folders")
    }

    private func loop() {
        defer {
            for target in targets { target.changes.watchesIncomplete() }
            for waiter in catchingUp.withLock({ waiting in
                defer { waiting = nil }
                return waiting ?? []
            }) {
                waiter.resume(returning: false)
            }
        }
        while !stopRequested.withLock({ $0 }) {
            do {
                // What the kernel queued before a waiter asked was handled in an earlier round
                // or is in this drain; with no one waiting, wait for events (or a waiter's wake).
                let waiting = catchingUp.withLock { waiting in
                    defer { waiting = [] }
                    return waiting ?? []
                }
                var events = waiting.isEmpty ? try inotify.read() : try inotify.drain()
                // A rename read without its second half would make the folder it left look
                // like a deletion to a scan of that folder alone (the folder it went to is not
                // in the scan's scope yet): wait a little for the other half (a move out of the
                // replica has none, and costs these 50 ms at most).
                var waits = 0
                while Inotify.hasUnpairedMove(events) && waits < 5 {
                    events += try inotify.events(within: 10)
                    waits += 1
                }
                var woken: [Int: ServeWake] = [:]
                for event in events { handle(event, into: &woken) }
                for (index, reasons) in woken { targets[index].wakeup.signal(reasons) }
                for waiter in waiting { waiter.resume(returning: true) }
            } catch {
                logger.error("inotify failed: \(error.message); local changes are found by polling only")
                return
            }
        }
    }

    private func handle(_ event: InotifyEvent, into woken: inout [Int: ServeWake]) {
        if event.isOverflow {
            logger.warning("inotify dropped events; scanning every replica")
            for index in targets.indices {
                watchTree(target: index, path: targets[index].root)
                targets[index].changes.everythingChanged()
                woken[index, default: []].insert(.overflow)
            }
            return
        }
        if event.watch == signalsWatch {
            if let name = event.name, let index = targets.firstIndex(where: { $0.domain == name }) {
                woken[index, default: []].insert(.remote)
            }
            return
        }
        if event.has(IN_IGNORED) {
            watches[event.watch] = nil
            return
        }
        guard let (index, folder) = watches[event.watch] else { return }
        guard let name = event.name else {
            // A watched folder opened itself (a listing, the sync's own scan among them)
            // changes nothing; waking for it made every sync wake the next one. Nor does a
            // change of its attributes (below).
            if event.mask & ~UInt32(IN_OPEN | IN_ISDIR | IN_ATTRIB) == 0 { return }
            // The folder itself was deleted or moved: the parent's event covers it; the root's
            // own removal still deserves a scan.
            if folder == targets[index].root {
                targets[index].changes.everythingChanged()
                woken[index, default: []].insert(.local)
            }
            return
        }
        let path = folder + "/" + name
        if event.has(IN_OPEN) {
            // Programs' opens (the engine's own too, which only make a file look used). Only
            // files of the replica count, not placeholders or the engine's temporary files.
            if !event.isFolder, path.hasPrefix(targets[index].root + "/"), !name.hasSuffix(Replica.placeholderSuffix),
                !Replica.isTemporary(name), !targets[index].ignore.ignores(name)
            {
                targets[index].opened(String(path.dropFirst(targets[index].root.count + 1)))
            }
            if event.mask & ~UInt32(IN_OPEN | IN_ISDIR) == 0 { return }
        }
        // A folder's mode, dates and extended attributes are not sent to the store: a change of
        // them is none to sync. The engine's own status writes (``FolderStatus``) are such
        // changes, and waking for them would make a population or a pin wake a sync.
        if event.isFolder && event.mask & ~UInt32(IN_ATTRIB | IN_ISDIR) == 0 { return }
        // An attribute change of an entry that has no name there (any more): the engine's
        // unnamed files (`O_TMPFILE`, which inotify names `#<inode>`), whose status it stamps
        // before it names them; an entry a program changed and then removed or renamed has an
        // event of its own for that.
        if event.mask & ~UInt32(IN_ATTRIB) == 0 {
            var info = stat()
            if lstat(path, &info) != 0 && errno == ENOENT { return }
        }
        if event.isFolder {
            if event.has(IN_MOVED_FROM) || event.has(IN_DELETE) { unwatchTree(path) }
            if event.has(IN_CREATE) || event.has(IN_MOVED_TO), !targets[index].ignore.ignores(name) {
                watchTree(target: index, path: path)
            }
        }
        if !event.isFolder, path.hasPrefix(targets[index].root + "/"),
            targets[index].isEngineWriting(String(path.dropFirst(targets[index].root.count + 1)))
        {
            return
        }
        if Self.isRelevant(event, name: name, ignore: targets[index].ignore) {
            woken[index, default: []].insert(.local)
            noteChange(event, target: index, folder: folder, name: name)
            // A file closed after writing or renamed into place is complete: no settle time.
            if !event.isFolder, !name.hasSuffix(Replica.placeholderSuffix), path.hasPrefix(targets[index].root + "/") {
                let relative = String(path.dropFirst(targets[index].root.count + 1))
                if event.has(IN_CLOSE_WRITE) || event.has(IN_MOVED_TO) {
                    var info = stat()
                    if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                        targets[index].writes(relative, Replica.nanoseconds(info.st_mtim))
                    }
                } else if event.has(IN_MODIFY) || event.has(IN_CREATE) {
                    targets[index].writes(relative, nil)
                }
            }
        }
    }

    /// Tells the target's ``ChangedFolders`` what a relevant event changed: the folder it
    /// happened in, and a folder that appeared there with everything below it.
    private func noteChange(_ event: InotifyEvent, target index: Int, folder: String, name: String) {
        let root = targets[index].root
        guard folder == root || folder.hasPrefix(root + "/") else { return }
        let relative = folder == root ? "" : String(folder.dropFirst(root.count + 1))
        if event.isFolder && (event.has(IN_CREATE) || event.has(IN_MOVED_TO)) {
            targets[index].changes.treeAppeared(relative.isEmpty ? name : relative + "/" + name)
        } else {
            targets[index].changes.folderChanged(relative)
        }
    }

    /// Whether an event in a replica may be a user's change.
    static func isRelevant(_ event: InotifyEvent, name: String, ignore: IgnoreRules) -> Bool {
        if name.hasPrefix(".fp-tmp-") { return false }
        if name.hasSuffix(Replica.placeholderSuffix) {
            // The engine writes placeholders (a temporary file renamed into place); a user
            // deletes or moves them.
            return event.has(IN_DELETE) || event.has(IN_MOVED_FROM)
        }
        return !ignore.ignores(name)
    }

    /// Watches a folder and every folder below it (not following symlinks); folders already
    /// watched get their current path.
    private func watchTree(target: Int, path: String) {
        var queue = [path]
        while let folder = queue.popLast() {
            let watch: Int32
            do {
                watch = try inotify.addWatch(folder)
            } catch {
                if error.code != .noSuchItem {
                    // A folder no one watches may change unseen: every sync compares everything.
                    targets[target].changes.watchesIncomplete()
                    if !warnedAboutLimit {
                        warnedAboutLimit = true
                        logger.warning(
                            "\(targets[target].domain): \(error.message); every sync of it compares the whole replica, and changes are found at the next poll"
                        )
                    }
                }
                continue
            }
            watches[watch] = (target, folder)
            guard let directory = opendir(folder) else { continue }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let type = DirectoryEntry.type(of: entry)
                guard type == Int32(DT_DIR) || type == Int32(DT_UNKNOWN) else { continue }
                guard let name = Filename.decode(entry), name != ".", name != "..", !targets[target].ignore.ignores(name) else {
                    continue
                }
                let child = folder + "/" + name
                var info = stat()
                guard lstat(child, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { continue }
                queue.append(child)
            }
        }
    }

    /// Stops watching a folder that moved away or was deleted, and everything below it.
    private func unwatchTree(_ path: String) {
        for (watch, entry) in watches where entry.path == path || entry.path.hasPrefix(path + "/") {
            inotify.removeWatch(watch)
            watches[watch] = nil
        }
    }
}
