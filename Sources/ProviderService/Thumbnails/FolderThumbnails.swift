import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderStore
import Thumbnails

#if canImport(Glibc)
    import Glibc
#endif

/// Thumbnails `serve` makes by itself, so file managers (Nautilus, Dolphin, Thunar) show
/// previews of images and videos that are not downloaded: when a program opens a folder of a
/// served domain (``opened(domain:path:process:user:)``: the FUSE layout's `opendir`, the fanotify
/// layout's ``FolderOpenNotifier``), the
/// folder's dataless images and videos get freedesktop.org thumbnails (`normal` and `large`,
/// ``FreedesktopThumbnail``) in this process's user's cache (`$XDG_CACHE_HOME/thumbnails`,
/// default `~/.cache`), made from the store's thumbnails (`fetchThumbnails`), never from the
/// files' contents: nothing is downloaded for them.
///
/// Bounded, so a folder of 10,000 images never floods the store: each folder open makes at
/// most ``perOpenLimit`` thumbnails (200 unless told: ``defaultPerOpenLimit``) and looks at most at ``perOpenRows`` items (in name order;
/// opening the folder again goes on after the last one it looked at), at most
/// ``queueLimit`` folders wait (further opens are dropped until one is done; the same folder is
/// never queued twice), and one thumbnail is made at a time. Not for:
/// - a program an access rule limits (`deny` or `present-only`: indexers and thumbnailers
///   denied by a rule do not get previews made for them either);
/// - another user's program (the cache is this user's), nor this process's own opens;
/// - a store that makes no thumbnails (learned at the first folder of its domain; later opens
///   there are not even queued: a fresh `find` of a FUSE domain opens every folder),
///   files that are downloaded (the file manager makes those itself), files that are neither
///   images nor videos;
/// - a file whose store declined a thumbnail at its current version (remembered while `serve`
///   runs, at most ``declinedLimit`` of them).
///
/// The work runs in one task of its own; its database reads and cache writes go through the
/// engine's executor (threads of its own), the store's thumbnails through the backend.
public final class FolderThumbnails: Sendable {
    /// The most thumbnails one folder open makes, unless told otherwise.
    public static let defaultPerOpenLimit = 200
    /// The most folders waiting.
    public static let queueLimit = 8
    /// The most items one folder open looks at (the next open goes on after them).
    public static let perOpenRows = 2_000
    /// The most files remembered as declined by their store.
    static let declinedLimit = 10_000

    /// A folder to look at.
    struct Folder: Hashable, Sendable {
        var domain: String
        var path: String
    }

    private struct State {
        var queue: [Folder] = []
        /// Queued or being worked on.
        var pending: Set<Folder> = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopped = false
        /// Files whose store declined a thumbnail: domain, identifier and content version.
        var declined: Set<String> = []
        /// How many thumbnails were made (for tests and the log).
        var made = 0
        /// Where the next open of a folder goes on (the path of the last item looked at), for
        /// folders whose last open stopped at a limit.
        var cursors: [Folder: String] = [:]
        /// Domains whose store makes no thumbnails: their folders are not queued.
        var withoutThumbnails: Set<String> = []
    }

    let manager: ProviderManager
    /// The cache's root (`$XDG_CACHE_HOME`, else `~/.cache`).
    public let cacheHome: URL
    let logger: Logger
    /// The most thumbnails one folder open makes.
    public let perOpenLimit: Int
    private let gate: AccessGate
    private let state = Mutex(State())
    private let worker = Mutex<Task<Void, Never>?>(nil)

    /// Thumbnails for `manager`'s domains in `cacheHome` (``FreedesktopThumbnail/cacheHome(environment:)``),
    /// at most `perOpenLimit` (at least 1) per folder open.
    public init(manager: ProviderManager, cacheHome: URL, perOpenLimit: Int = defaultPerOpenLimit, logger: Logger) {
        self.manager = manager
        self.perOpenLimit = max(1, perOpenLimit)
        self.cacheHome = cacheHome
        self.logger = logger
        gate = AccessGate(manager: manager)
    }

    /// This process's user's thumbnail cache: `$XDG_CACHE_HOME`, else `~/.cache`.
    public static func defaultCacheHome() -> URL { FreedesktopThumbnail.cacheHome() }

    /// Starts the worker.
    public func start() {
        let task = Task { [self] in await run() }
        worker.withLock { $0 = task }
    }

    /// Stops the worker after the thumbnail it is making; the folders waiting are dropped.
    public func stop() async {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.stopped = true
            state.queue.removeAll()
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
        let task = worker.withLock { $0 }
        task?.cancel()
        await task?.value
    }

    /// A program opened the folder at `path` (relative) of `domain`: queues it unless the
    /// program is not to get thumbnails (see the type) or the queue is full. Reads the
    /// program's identity from `/proc` when a rule may limit it: call it on a thread of its own
    /// (a FUSE request's, the notifier's), never on Swift's cooperative pool. Any such thread.
    public func opened(domain: String, path: String, process: Int32, user: UInt32) {
        guard process > 0, process != getpid(), user == getuid(), !state.withLock({ $0.withoutThumbnails.contains(domain) }),
            !gate.mayLimit(pid: process)
        else { return }
        let folder = Folder(domain: domain, path: path)
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.stopped, !state.pending.contains(folder), state.queue.count < Self.queueLimit else { return nil }
            state.queue.append(folder)
            state.pending.insert(folder)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// How many thumbnails were made since the start.
    public var madeCount: Int { state.withLock { $0.made } }

    // MARK: The worker

    private func run() async {
        while let folder = await next() {
            await thumbnails(of: folder)
            _ = state.withLock { $0.pending.remove(folder) }
        }
    }

    /// The next folder, waiting for one; `nil` once stopped.
    private func next() async -> Folder? {
        while true {
            if Task.isCancelled { return nil }
            let taken = state.withLock { state -> (Folder?, Bool) in
                if state.stopped { return (nil, true) }
                return state.queue.isEmpty ? (nil, false) : (state.queue.removeFirst(), false)
            }
            if taken.1 { return nil }
            if let folder = taken.0 { return folder }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.stopped || !state.queue.isEmpty { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    /// Makes the thumbnails one open of `folder` is due, in name order from where the last open
    /// of it stopped: at most ``perOpenLimit`` made and ``perOpenRows`` items looked at.
    private func thumbnails(of folder: Folder) async {
        guard let controller = try? await manager.controller(for: folder.domain) else { return }
        guard controller.backend.capabilities.supportsThumbnails else {
            // Asking for the controller at every folder opened was 5-10% of `serve`'s CPU
            // during a fresh `find` of 100,000 files through a FUSE mount of a local store.
            _ = state.withLock { $0.withoutThumbnails.insert(folder.domain) }
            return
        }
        guard let domainID = controller.domain.id else { return }
        let (store, cacheHome, replicaPath) = (manager.store, cacheHome, controller.domain.replicaPath)
        var after = state.withLock { $0.cursors.removeValue(forKey: folder) }
        var (made, looked) = (0, 0)
        pages: while !Task.isCancelled, !state.withLock({ $0.stopped }) {
            if made >= perOpenLimit || looked >= Self.perOpenRows {
                // Where the next open of the folder goes on.
                state.withLock { $0.cursors[folder] = after }
                break
            }
            let page: [ItemRecord]
            do {
                let start = after
                page = try await manager.blocking { () throws(FileProviderError) in
                    try store.children(domainID: domainID, inFolderAt: folder.path, after: start, limit: 256)
                }
            } catch {
                logger.warning("\(folder.domain): thumbnails of \(TerminalText.quoted(folder.path)): \(error.message)")
                break
            }
            looked += page.count
            let candidates = page.filter { Self.wantsThumbnail($0) && !isDeclined($0) }
            let due =
                (try? await manager.blocking { () -> [ItemRecord] in
                    candidates.filter { !Self.hasCurrentThumbnails($0, replicaPath: replicaPath, cacheHome: cacheHome) }
                }) ?? []
            for record in due {
                if made >= perOpenLimit || Task.isCancelled || state.withLock({ $0.stopped }) {
                    state.withLock { $0.cursors[folder] = after }
                    break pages
                }
                do {
                    _ = try await controller.freedesktopThumbnails(
                        at: record.path, sizes: FreedesktopThumbnail.Size.allCases, cacheHome: cacheHome)
                    made += 1
                    state.withLock { $0.made += 1 }
                    logger.debug("\(folder.domain): \(TerminalText.quoted(record.path)): thumbnails made from the store's")
                } catch where error.code == .notSupported || error.code == .noSuchItem || error.code == .corruptData {
                    // The store has none for it at this version (or it is gone): not asked again.
                    declined(record)
                    logger.debug("\(folder.domain): \(TerminalText.quoted(record.path)): no thumbnail: \(error.message)")
                } catch {
                    // The store is in trouble: the next open of the folder tries again.
                    logger.notice("\(folder.domain): thumbnails of \(TerminalText.quoted(folder.path)) stopped: \(error.message)")
                    break pages
                }
                after = record.path
            }
            guard page.count == 256, let last = page.last else { break }
            after = last.path
        }
        if made > 0 {
            logger.info(
                "\(folder.domain): made \(made) thumbnails in \(TerminalText.quoted(folder.path.isEmpty ? "/" : folder.path)) from the store's, nothing downloaded"
            )
        }
    }

    /// A file not downloaded whose type has previews: an image or a video.
    static func wantsThumbnail(_ record: ItemRecord) -> Bool {
        guard record.kind == .file, record.state != .materialized || record.isOutdated else { return false }
        let mime = ContentType.mimeType(of: record.contentType)
        return mime.hasPrefix("image/") || mime.hasPrefix("video/")
    }

    /// Whether both sizes are in the cache for the file's current modification time. Blocking.
    static func hasCurrentThumbnails(_ record: ItemRecord, replicaPath: String, cacheHome: URL) -> Bool {
        let uri = FreedesktopThumbnail.uri(ofPath: (replicaPath as NSString).appendingPathComponent(record.path))
        let seconds = FreedesktopThumbnail.modificationTime(of: record.modificationDate)
        return FreedesktopThumbnail.Size.allCases.allSatisfy {
            FreedesktopThumbnail.isCurrent(uri: uri, size: $0, modificationTime: seconds, cacheHome: cacheHome)
        }
    }

    private func key(_ record: ItemRecord) -> String {
        "\(record.domainID)\u{0}\(record.identifier.rawValue)\u{0}\(record.contentVersion.base64EncodedString())"
    }

    private func isDeclined(_ record: ItemRecord) -> Bool {
        let key = key(record)
        return state.withLock { $0.declined.contains(key) }
    }

    private func declined(_ record: ItemRecord) {
        let key = key(record)
        state.withLock { state in
            if state.declined.count >= Self.declinedLimit { state.declined.removeAll() }
            state.declined.insert(key)
        }
    }
}
