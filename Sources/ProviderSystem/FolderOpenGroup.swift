import CSystemShims
import Foundation
import ProviderCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A fanotify group of permission events for folder opens (`FAN_OPEN_PERM` on folders): an
/// `opendir` of a marked folder, in any process, waits until the group answers. The kernel
/// side of populating dataless folders when a program opens them; what to do with an event is
/// the caller's. With `notifications` (``init(notifications:)``) a group nothing waits on,
/// told of every open of a file or folder on the mounts it marks (``markOpens(onMountAt:)``):
/// the kernel side of thumbnails for the folders programs open.
///
/// Needs `CAP_SYS_ADMIN`. Threads: ``nextEvents(waiting:)`` blocks; call it from one thread of
/// its own, never from Swift's cooperative pool. Everything else may be called from any
/// thread. ``close()`` (or the group's end) lets every program still waiting go on and takes
/// the marks away.
package final class FolderOpenGroup: @unchecked Sendable {
    /// One open a program waits on.
    package struct Event: Sendable {
        /// The opened folder, opened by the kernel for this process; closed by ``allow(_:)``.
        package let fileDescriptor: Int32
        /// The process whose open waits.
        package let processIdentifier: Int32
    }

    private let fd: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Whether ``fd`` is still open: ``close()`` closes it. Calls on it hold this lock, so none
    /// reaches a descriptor number another file took since.
    private let isOpen = Mutex(true)

    /// Starts a group.
    /// - Throws: `permissionDenied` without `CAP_SYS_ADMIN` (`EPERM`); `localIOFailure` when
    ///   fanotify cannot be started otherwise or the wake-up pipe cannot be made. The message
    ///   starts with "fanotify: " and the kernel's reason.
    package init(notifications: Bool = false) throws(FileProviderError) {
        fd = notifications ? fp_fanotify_open_notifications() : fp_fanotify_open()
        if fd < 0 {
            let code = errno
            throw FileProviderError(code == EPERM ? .permissionDenied : .localIOFailure, "fanotify: \(String(cString: strerror(code)))")
        }
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) != 0 {
            Glibc.close(fd)
            throw POSIXError.error("cannot create the wake-up pipe for", path: "fanotify")
        }
        (wakeRead, wakeWrite) = (ends[0], ends[1])
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    }

    deinit {
        isOpen.withLock { open in if open { Glibc.close(fd) } }
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    /// Marks the folder at `path` (an open of it raises an event), or with `add` false removes
    /// the mark: 0, or the `errno` of the refusal (`ENOENT`, `ENOTDIR` when it is not a
    /// folder). Nothing, and 0, once the group is closed.
    @discardableResult
    package func mark(_ path: String, add: Bool = true) -> Int32 {
        isOpen.withLock { open -> Int32 in
            guard open else { return 0 }
            return fp_fanotify_mark_folder(fd, path, add ? 1 : 0) == 0 ? 0 : errno
        }
    }

    /// Asks a group of notifications for an event whenever a file or folder of the mount at
    /// `path` (its mount point) is opened: 0, or the `errno` of the refusal. Nothing, and 0,
    /// once the group is closed.
    @discardableResult
    package func markOpens(onMountAt path: String) -> Int32 {
        isOpen.withLock { open -> Int32 in
            guard open else { return 0 }
            return fp_fanotify_mark_mount_opens(fd, path) == 0 ? 0 : errno
        }
    }

    /// Closes a notification's descriptor (a group of notifications answers nothing).
    package func finish(_ event: Event) {
        Glibc.close(event.fileDescriptor)
    }

    /// Whether an event is about a folder. Blocking.
    package static func isFolder(_ event: Event) -> Bool {
        var status = stat()
        return fstat(event.fileDescriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
    }

    /// The user a process runs as (the owner of `/proc/PID`), or `nil` when it is gone.
    package static func user(ofProcess pid: Int32) -> UInt32? {
        var status = stat()
        return stat("/proc/\(pid)", &status) == 0 ? status.st_uid : nil
    }

    /// Waits, with `waiting`, until events are queued or ``wake()`` is called; without, only
    /// looks. Returns the events read (at most 256) and whether a wake-up came (it stays until
    /// the group ends: every later call says so too). Blocking.
    package func nextEvents(waiting: Bool) -> (events: [Event], woken: Bool) {
        var events = [fp_fanotify_event](repeating: fp_fanotify_event(), count: 256)
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while poll(&fds, 2, waiting ? -1 : 0) < 0 && errno == EINTR {}
        let count = fp_fanotify_read(fd, &events, Int32(events.count))
        let read = events.prefix(Int(max(0, count))).map { Event(fileDescriptor: $0.fd, processIdentifier: $0.pid) }
        return (read, (fds[1].revents & Int16(POLLIN)) != 0)
    }

    /// Makes a blocked or the next ``nextEvents(waiting:)`` return at once. Any thread.
    package func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Lets the program's open go on (when the group is still open) and closes the event's
    /// descriptor. Answer each event once.
    package func allow(_ event: Event) {
        isOpen.withLock { open in if open { _ = fp_fanotify_respond(fd, event.fileDescriptor, 1) } }
        Glibc.close(event.fileDescriptor)
    }

    /// Closes the group: programs still waiting go on, and no folder is marked any more.
    /// Closing twice does nothing the second time.
    package func close() {
        isOpen.withLock { open in
            if open { Glibc.close(fd) }
            open = false
        }
    }

    /// The path of the folder an event is about, as this process sees it, or `nil`.
    package static func path(of event: Event) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/fd/\(event.fileDescriptor)", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
