import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The local store's change feed: inotify on every folder of the store, on a thread of its own,
/// and a bounded log of the folders that changed.
///
/// Each change the kernel reports (an entry created, deleted, moved in or out, written and
/// closed, modified, or its attributes changed) marks the folder holding it with the next
/// number of a sequence, and a deletion or a move away also remembers the name; a folder that
/// appears (created, or moved in from elsewhere) is watched at once, with every folder below
/// it, and marked to be listed with everything below it. An anchor is this feed's instance (a
/// random number made when the backend opens, so anchors of another process never match) and a
/// sequence number; the changes since it are the current listings of the folders marked after
/// it, and the remembered names no longer in them. The log holds at most
/// ``maximumChanges`` folders and names: past that, after the kernel dropped events
/// (`IN_Q_OVERFLOW`), or while a folder cannot be watched (`fs.inotify.max_user_watches`
/// reached), every earlier anchor expires and the engine lists the whole store instead.
///
/// The watches start with the first ``anchor()`` (a backend that is only listed never watches
/// anything). State is guarded by one lock; the thread blocks in `poll(2)` and takes the lock
/// only to read what the kernel queued, which callers of ``anchor()`` and ``validate(_:)``
/// also do first, so they see every change made before they were called.
final class ChangeFeed: @unchecked Sendable {
    /// One folder that changed.
    struct Entry: Sendable {
        var path: String
        var sequence: UInt64
        /// List it with everything below it (it appeared with its contents).
        var recursive: Bool
        /// Names deleted or moved away from it (reported unless they are back), as bytes: names
        /// are told apart byte for byte, as the file system does.
        var deleted: Set<[UInt8]>
    }

    /// The most folders and deleted names the log remembers before earlier anchors expire.
    static let maximumChanges = 10_000
    /// How long the feed stays off after a folder could not be watched before it tries again.
    static let retryInterval: Double = 300
    /// The kernel events that change what a listing returns.
    static let mask = UInt32(
        IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_EXCL_UNLINK)
    private static let magic: [UInt8] = Array("LFC1".utf8)

    private let root: FileHandleFD
    private let rootPath: String
    private let instance: [UInt8]
    private let lock = NSLock()

    // Guarded by `lock`.
    private var inotify: InotifyFD?
    private var stopped = false
    private var watches: [Int32: String] = [:]
    private var sequence: UInt64 = 0
    /// Anchors below this were made before changes the log no longer holds.
    private var floor: UInt64 = 0
    /// By the bytes of the folder's path.
    private var entries: [[UInt8]: Entry] = [:]
    /// Folders and deleted names in `entries`.
    private var size = 0
    /// Why the feed cannot answer now, and since when.
    private var off: (reason: String, since: Date)?
    /// Reading the inotify descriptor failed: the thread ends, the feed stays off.
    private var readFailed = false

    init(root: FileHandleFD, rootPath: String) {
        self.root = root
        self.rootPath = rootPath
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        instance = bytes
    }

    /// How many folders are watched now (for tests and diagnostics).
    var watchCount: Int { lock.withLock { watches.count } }

    /// The anchor for "now", starting the watches the first time (and again when they were
    /// given up and ``retryInterval`` has passed). Blocking: the backend's threads.
    func anchor() -> SyncAnchor {
        lock.withLock {
            if inotify == nil && !stopped {
                do throws(FileProviderError) {
                    let made = try InotifyFD()
                    inotify = made
                    startThread(made)
                    watchAll()
                } catch {
                    goOff("inotify cannot be started: \(error.message)")
                }
            } else if let off, Date().timeIntervalSince(off.since) >= Self.retryInterval, inotify != nil, !readFailed {
                watchAll()
            }
            catchUp()
            return encode(sequence)
        }
    }

    /// Checks an anchor and returns its sequence number. Blocking.
    /// - Throws: `syncAnchorExpired` when the anchor is not this feed's (another process, or
    ///   not an anchor), the feed is off, or the log no longer holds what changed since it.
    func validate(_ anchor: SyncAnchor) throws(FileProviderError) -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        catchUp()
        return try check(anchor)
    }

    /// Forgets what changed up to `sequence`, which the changes of the whole store were just
    /// reported up to: the engine asks from there next, and an earlier anchor expires (a sync
    /// that failed after taking them lists the whole store). A folder reported deleted and
    /// made again afterwards is then only new (see ``handle(_:)``). Blocking.
    func reported(upTo sequence: UInt64) {
        lock.withLock {
            guard sequence > floor, sequence <= self.sequence else { return }
            floor = sequence
            for (key, entry) in entries where entry.sequence <= sequence {
                size -= 1 + entry.deleted.count
                entries[key] = nil
            }
        }
    }

    /// The next folders that changed after `sequence`, at or below `scope` (`nil`: anywhere),
    /// oldest first, at most `limit`; and the current sequence number. Blocking.
    /// - Throws: `syncAnchorExpired` as ``validate(_:)``, when the log lost changes
    ///   after `sequence` meanwhile.
    func changes(after sequence: UInt64, under scope: String?, limit: Int) throws(FileProviderError)
        -> (entries: [Entry], current: UInt64)
    {
        lock.lock()
        defer { lock.unlock() }
        catchUp()
        if let off { throw FileProviderError(.syncAnchorExpired, "the local store's change feed is off (\(off.reason))") }
        guard sequence >= floor else {
            throw FileProviderError(.syncAnchorExpired, "the local store's change feed lost track of changes since the anchor")
        }
        var found = entries.values.filter { entry in
            entry.sequence > sequence && scope.map { Self.isAtOrBelow(entry.path, $0) } ?? true
        }
        found.sort { $0.sequence < $1.sequence }
        return (Array(found.prefix(limit)), self.sequence)
    }

    /// An anchor for a sequence number of this feed.
    func encode(_ sequence: UInt64) -> SyncAnchor {
        var bytes = Self.magic + instance
        withUnsafeBytes(of: sequence.bigEndian) { bytes += $0 }
        return SyncAnchor(Data(bytes))
    }

    /// A folder that was to be listed with everything below it has been listed: its
    /// subfolders (paths) are marked to be listed the same way, after it.
    func expanded(_ entry: Entry, subfolders: [String]) {
        lock.withLock {
            let key = Array(entry.path.utf8)
            guard off == nil, var current = entries[key], current.sequence == entry.sequence else { return }
            current.recursive = false
            entries[key] = current
            for folder in subfolders { record(folder, recursive: true) }
        }
    }

    /// Stops the thread and the watches. Any thread.
    func stop() {
        let made = lock.withLock { () -> InotifyFD? in
            stopped = true
            return inotify
        }
        made?.wake()
    }

    // MARK: Under the lock

    private func check(_ anchor: SyncAnchor) throws(FileProviderError) -> UInt64 {
        let raw = [UInt8](anchor.rawValue)
        guard raw.count == Self.magic.count + 16 + 8, raw.starts(with: Self.magic + instance) else {
            throw FileProviderError(
                .syncAnchorExpired, "the anchor was not made by this run of the local store's change feed")
        }
        let value = raw.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        if let off { throw FileProviderError(.syncAnchorExpired, "the local store's change feed is off (\(off.reason))") }
        guard value >= floor, value <= sequence else {
            throw FileProviderError(.syncAnchorExpired, "the local store's change feed lost track of changes since the anchor")
        }
        return value
    }

    private func startThread(_ made: InotifyFD) {
        let thread = Thread { [self] in
            ThreadName.setCurrent("local-feed")
            while true {
                made.wait()
                let done = lock.withLock { () -> Bool in
                    if stopped { return true }
                    catchUp()
                    return readFailed
                }
                if done { break }
            }
            lock.withLock {
                inotify = nil
                watches = [:]
            }
        }
        thread.name = "local-change-feed"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Handles what the kernel queued (drops it while the feed is off: the queue must be read,
    /// or the thread's `poll` would never sleep).
    private func catchUp() {
        guard let inotify, !readFailed else { return }
        guard let events = inotify.drain() else {
            readFailed = true
            if off == nil { goOff("reading inotify events failed") }
            return
        }
        if off != nil { return }
        for event in events {
            handle(event)
            if off != nil { return }
        }
    }

    private func handle(_ event: RawInotifyEvent) {
        if event.has(IN_Q_OVERFLOW) {
            // Events were dropped: what was watched may have moved unseen.
            watchAll()
            return
        }
        if event.has(IN_IGNORED) {
            watches[event.watch] = nil
            return
        }
        guard let folder = watches[event.watch], !event.name.isEmpty else { return }
        // Names the listing never shows (not UTF-8, the backend's staging files) change nothing.
        guard let name = Filename.decode(event.name), !name.hasPrefix(LocalPath.stagingPrefix) else { return }
        let path = folder.isEmpty ? name : folder + "/" + name
        let isFolder = event.has(IN_ISDIR)
        if isFolder && (event.has(IN_CREATE) || event.has(IN_MOVED_TO)) {
            // A folder that went away and is back under the same name: the feed cannot tell
            // the engine which of the old one's items are gone (it names the folder only, and
            // the folder is there), so it lists everything.
            if entries[Array(folder.utf8)]?.deleted.contains(Array(name.utf8)) == true { expireAll() }
            record(folder)
            // Watched before it is listed: what is put in it from now on is seen.
            if let opened = open(path) {
                watchTree(opened, path: path)
                record(path, recursive: true)
            }
        } else if event.has(IN_DELETE) || event.has(IN_MOVED_FROM) {
            if isFolder {
                // What changed in it is moot: the engine drops what was below it.
                if event.has(IN_MOVED_FROM) { unwatchTree(path) }
                forget(below: path)
            }
            record(folder, deleted: name)
        } else {
            record(folder)
        }
    }

    /// Marks a folder as changed now.
    private func record(_ path: String, recursive: Bool = false, deleted name: String? = nil) {
        guard off == nil else { return }
        sequence += 1
        let key = Array(path.utf8)
        if var entry = entries[key] {
            entry.sequence = sequence
            entry.recursive = entry.recursive || recursive
            if let name, entry.deleted.insert(Array(name.utf8)).inserted { size += 1 }
            entries[key] = entry
        } else {
            entries[key] = Entry(
                path: path, sequence: sequence, recursive: recursive, deleted: name.map { [Array($0.utf8)] } ?? [])
            size += name == nil ? 1 : 2
        }
        if size > Self.maximumChanges { expireAll() }
    }

    /// Forgets the changes of a folder that went away and of the folders below it.
    private func forget(below path: String) {
        for (key, entry) in entries where Self.isAtOrBelow(entry.path, path) {
            size -= 1 + entry.deleted.count
            entries[key] = nil
        }
    }

    /// Forgets every change: anchors made before now expire.
    private func expireAll() {
        sequence += 1
        floor = sequence
        entries = [:]
        size = 0
    }

    /// Watches every folder of the store anew; earlier anchors expire.
    private func watchAll() {
        for watch in watches.keys { inotify?.removeWatch(watch) }
        watches = [:]
        off = nil
        expireAll()
        watchTree(root, path: "")
    }

    /// Gives the watches up: every anchor expires until they are back.
    private func goOff(_ reason: String) {
        for watch in watches.keys { inotify?.removeWatch(watch) }
        watches = [:]
        expireAll()
        off = (reason, Date())
        LocalBackend.logger.warning("\(rootPath): \(reason); every sync lists the whole store")
    }

    /// Watches a folder and every folder below it (never through a symlink). Each folder is
    /// watched before it is read, so a subfolder made meanwhile is reported by the kernel.
    private func watchTree(_ top: FileHandleFD, path: String) {
        guard let inotify else { return }
        var queue = [(top, path)]
        while let (folder, folderPath) = queue.popLast() {
            switch inotify.addWatch(folder, mask: Self.mask) {
            case .success(let watch):
                // Watched already under another path (a bind mount of a folder above): its
                // folders are watched, and descending again would never end.
                if watches[watch] != nil { continue }
                watches[watch] = folderPath
            case .failure(.gone): continue
            case .failure(.limitReached):
                goOff(
                    "cannot watch \(folderPath.isEmpty ? "/" : "/" + folderPath): the inotify watch limit fs.inotify.max_user_watches (\(Self.watchLimit())) is reached"
                )
                return
            case .failure(.other(let reason)):
                goOff("cannot watch \(folderPath.isEmpty ? "/" : "/" + folderPath): \(reason)")
                return
            }
            let display = folderPath.isEmpty ? "/" : "/" + folderPath
            guard let names = try? folder.subfolderNames(displayPath: display) else { continue }
            for raw in names {
                guard let name = Filename.decode(raw), !name.hasPrefix(LocalPath.stagingPrefix) else { continue }
                let child = folderPath.isEmpty ? name : folderPath + "/" + name
                guard let opened = try? folder.openFolder(name, displayPath: child) else { continue }
                queue.append((opened, child))
            }
        }
    }

    /// Stops watching a folder that moved away, and everything below it.
    private func unwatchTree(_ path: String) {
        for (watch, watched) in watches where Self.isAtOrBelow(watched, path) {
            inotify?.removeWatch(watch)
            watches[watch] = nil
        }
    }

    /// Opens a folder of the store by relative path, never through a symlink; `nil` when it is
    /// gone or not a folder.
    private func open(_ path: String) -> FileHandleFD? {
        var current = root
        for name in path.split(separator: "/") {
            guard let next = try? current.openFolder(String(name), displayPath: path) else { return nil }
            current = next
        }
        return current
    }

    /// Whether `path` is `folder` or inside it, byte for byte (`""` is the root).
    static func isAtOrBelow(_ path: String, _ folder: String) -> Bool {
        if folder.isEmpty { return true }
        var rest = path.utf8[...]
        guard rest.starts(with: folder.utf8) else { return false }
        rest = rest.dropFirst(folder.utf8.count)
        return rest.isEmpty || rest.first == UInt8(ascii: "/")
    }

    /// `fs.inotify.max_user_watches`, for messages.
    static func watchLimit() -> String {
        (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_user_watches", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
    }
}
