import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Populates dataless folders when a program opens them, as Apple's system enumerates a dataless
/// folder the first time it is opened: each dataless folder of the served replicas carries a
/// fanotify permission mark (`FAN_OPEN_PERM`), so `opendir` in any other process waits until the
/// folder's items are written, then goes on and lists them.
///
/// Needs `CAP_SYS_ADMIN` (fanotify's permission events); ``init(populate:logger:)`` throws
/// without it and `serve` goes on without it. The engine's own process is never held (its scans
/// open every folder), and every event is answered: after the population, after it failed, or
/// after ``holdLimit`` seconds, the program goes on.
final class DatalessWatcher: @unchecked Sendable {
    /// Writes the items of the dataless folder at `path` (relative) of `domain`; returns
    /// whether it worked.
    typealias Populate = @Sendable (_ domain: String, _ path: String) async -> Bool

    /// The longest a program waits for a folder to be populated.
    static let holdLimit = 30.0

    /// The fanotify group (ProviderSystem): ``stop()`` closes it, which lets every program
    /// still waiting go on and takes the marks away (a process that goes on after serve would
    /// otherwise wait forever on a folder marked earlier).
    private let group: FolderOpenGroup
    private let populate: Populate
    private let logger: Logger
    /// Where programs reach each domain's folders, by domain: absolute paths, symlinks
    /// resolved as `/proc/self/fd` shows them (see ``watch(domain:root:seenAt:datalessFolders:)``).
    private let roots = Mutex<[String: [String]]>([:])
    private let events: FolderOpenEvents

    /// - Throws: `permissionDenied` without `CAP_SYS_ADMIN`; `localIOFailure` when fanotify
    ///   cannot be started otherwise.
    init(populate: @escaping Populate, logger: Logger) throws(FileProviderError) {
        do { group = try FolderOpenGroup() } catch where error.message.hasPrefix("fanotify: ") {
            let denied = error.code == .permissionDenied
            throw FileProviderError(
                error.code,
                "\(error.message); dataless folders are populated only by 'fileproviderctl populate', 'materialize' and 'pin'"
                    + (denied ? " (serve needs CAP_SYS_ADMIN to populate them when opened)" : ""))
        }
        self.populate = populate
        self.logger = logger
        events = FolderOpenEvents(group: group, threadName: "fileprovider-dataless")
    }

    /// Marks the dataless folders of a domain (relative paths) under `root`, the folder the
    /// engine writes them in; folders not there are skipped. `seenAt` are the other paths
    /// where programs reach the same folders: a dataless domain's replica path, where its
    /// backing folder (`root`) is mounted. An event names the folder by the path the program
    /// opened, so each is matched. Any thread; marking a folder twice is harmless.
    func watch(domain: String, root: String, seenAt: [String] = [], datalessFolders: [String]) {
        let marked = Self.resolved(root)
        let paths = [marked] + seenAt.map(Self.resolved).filter { $0 != marked }
        roots.withLock { $0[domain] = paths }
        mark(domain: domain, folders: datalessFolders)
    }

    /// Marks more dataless folders (relative paths) of a domain already watched
    /// (``watch(domain:root:seenAt:datalessFolders:)``); nothing for another domain. Any thread.
    func mark(domain: String, folders: [String]) {
        setMarks(domain: domain, folders: folders, add: true)
    }

    /// Removes the marks of folders (relative paths) of a domain that were populated; a folder
    /// without one is fine. Any thread.
    func unmark(domain: String, folders: [String]) {
        setMarks(domain: domain, folders: folders, add: false)
    }

    private func setMarks(domain: String, folders: [String], add: Bool) {
        guard let root = roots.withLock({ $0[domain]?.first }) else { return }
        for path in folders where !path.isEmpty {
            let failure = group.mark(root + "/" + path, add: add)
            if failure != 0 && add && failure != ENOENT && failure != ENOTDIR {
                logger.debug("\(domain): cannot watch \(TerminalText.quoted(path)): \(String(cString: strerror(failure)))")
            }
        }
    }

    /// Starts the thread that answers events.
    func start() {
        events.start { [self] event in answer(event) }
    }

    /// Stops the thread; returns once it ended, then closes the group: events still queued
    /// or waiting for a population are allowed, programs still waiting go on, and no folder is
    /// marked any more.
    func stop() async {
        await events.stop()
    }

    // MARK: The thread

    /// Populates the folder an event is about (unless the engine itself opened it), then lets
    /// the program go on. Never blocks this thread (the engine's own opens must be answered
    /// while a population waits for a sync), and never leaves an event unanswered.
    private func answer(_ event: FolderOpenGroup.Event) {
        let answered = Mutex(false)
        let logger = self.logger
        // The closures hold this watcher, not its descriptor's number: an answer that comes
        // after serve let the watcher go would otherwise write into whatever file took the
        // number (a database's, say).
        let allow: @Sendable () -> Bool = { [self] in
            guard
                answered.withLock({ done in
                    defer { done = true }
                    return !done
                })
            else { return false }
            group.allow(event)
            return true
        }
        guard event.processIdentifier != getpid(), let path = FolderOpenGroup.path(of: event), let (domain, relative) = locate(path) else {
            _ = allow()
            return
        }
        let populate = self.populate
        Task { [self] in
            // Populated: later opens need not wait. A failure keeps the mark: the next open tries again.
            if await PoolCheck.during("population on open", { await populate(domain, relative) }) {
                group.mark(path, add: false)
            }
            _ = allow()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.holdLimit) {
            if allow() {
                logger.warning(
                    "\(TerminalText.quoted("\(domain):/\(relative)")): not populated within \(Int(Self.holdLimit)) s; the program that opened it goes on"
                )
            }
        }
    }

    /// The domain and relative path of an absolute path in a served replica, by any of the
    /// paths its folders are seen at.
    private func locate(_ path: String) -> (String, String)? {
        roots.withLock { roots in
            for (domain, paths) in roots {
                for root in paths where path.hasPrefix(root + "/") {
                    return (domain, String(path.dropFirst(root.count + 1)))
                }
            }
            return nil
        }
    }

    /// `path` absolute, standardized, and with its symlinks resolved where it exists (as
    /// `/proc/self/fd` links name it).
    private static func resolved(_ path: String) -> String {
        let standardized = URL(fileURLWithPath: path).standardizedFileURL.path
        return OnAccessHandler.resolvedPath(standardized) ?? standardized
    }
}
