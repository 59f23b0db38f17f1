import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Tells ``FolderThumbnails`` of the folders programs open in the fanotify layout's replicas: a
/// fanotify group of notifications (`FAN_OPEN | FAN_ONDIR` on each replica's mount, where
/// programs reach the files; the engine works in the backing folder, on another mount, and is
/// not seen). Nothing waits on it. Opens of files are read and dropped.
///
/// Needs `CAP_SYS_ADMIN`, as the fanotify layout does; ``init(thumbnails:logger:)`` throws
/// without it. Events are read on a thread of its own.
final class FolderOpenNotifier: @unchecked Sendable {
    private let group: FolderOpenGroup
    private let thumbnails: FolderThumbnails
    private let logger: Logger
    /// Each domain's replica path, resolved as `/proc/self/fd` names it.
    private let roots = Mutex<[String: String]>([:])
    private let events: FolderOpenEvents

    /// - Throws: `permissionDenied` without `CAP_SYS_ADMIN`; `localIOFailure` otherwise.
    init(thumbnails: FolderThumbnails, logger: Logger) throws(FileProviderError) {
        group = try FolderOpenGroup(notifications: true)
        self.thumbnails = thumbnails
        self.logger = logger
        events = FolderOpenEvents(group: group, threadName: "fileprovider-opens")
    }

    /// Marks the mount at `replicaPath` (a fanotify domain's replica, mounted by the on-access
    /// handler), so the folders programs open there get thumbnails.
    func watch(domain: String, replicaPath: String) {
        let resolved = OnAccessHandler.resolvedPath(URL(fileURLWithPath: replicaPath).standardizedFileURL.path) ?? replicaPath
        let refused = group.markOpens(onMountAt: resolved)
        if refused != 0 {
            logger.notice("\(domain): no thumbnails for the folders programs open: fanotify: \(String(cString: strerror(refused)))")
            return
        }
        roots.withLock { $0[domain] = resolved }
    }

    /// Starts the thread that reads events.
    func start() {
        events.start { [self] event in note(event) }
    }

    /// Stops the thread and closes the group; returns once it ended.
    func stop() async {
        await events.stop()
    }

    private func note(_ event: FolderOpenGroup.Event) {
        defer { group.finish(event) }
        guard event.processIdentifier != getpid(), FolderOpenGroup.isFolder(event), let path = FolderOpenGroup.path(of: event),
            let user = FolderOpenGroup.user(ofProcess: event.processIdentifier)
        else { return }
        let located = roots.withLock { roots -> (String, String)? in
            for (domain, root) in roots {
                if path == root { return (domain, "") }
                if path.hasPrefix(root + "/") { return (domain, String(path.dropFirst(root.count + 1))) }
            }
            return nil
        }
        guard let (domain, relative) = located else { return }
        thumbnails.opened(domain: domain, path: relative, process: event.processIdentifier, user: user)
    }
}
