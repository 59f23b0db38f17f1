import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// One event read from an inotify descriptor.
package struct InotifyEvent: Sendable, Hashable {
    /// The watch it belongs to; -1 for `IN_Q_OVERFLOW`.
    package var watch: Int32
    package var mask: UInt32
    package var cookie: UInt32
    /// The name inside the watched folder, when the event is about a child.
    package var name: String?

    package func has(_ flag: Int32) -> Bool { mask & UInt32(bitPattern: flag) != 0 }
    package var isFolder: Bool { has(IN_ISDIR) }
    package var isOverflow: Bool { has(IN_Q_OVERFLOW) }
}

/// A Linux inotify descriptor with a wake-up pipe, so a thread blocked reading it can be stopped.
///
/// Blocking: ``read()`` waits in `poll(2)`; call it only from a thread of its own, never from
/// Swift's cooperative pool. ``wake()`` may be called from any thread.
package final class Inotify: @unchecked Sendable {
    private let fd: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    /// Events for folders the serve loop watches: changes of children, and the folder itself
    /// going away; and opens of children (`IN_OPEN`: when files were last used, for eviction;
    /// one event per open, not per read as `IN_ACCESS` would be).
    package static let folderMask = UInt32(
        IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF
            | IN_MOVE_SELF | IN_OPEN | IN_ONLYDIR | IN_EXCL_UNLINK)

    /// Opens an inotify descriptor.
    /// - Throws: `localIOFailure` when the kernel refuses (too many inotify instances).
    package init() throws(FileProviderError) {
        fd = inotify_init1(Int32(O_CLOEXEC | O_NONBLOCK))
        if fd < 0 { throw POSIXError.error("cannot start inotify for", path: "the replica folders") }
        var pipeEnds: [Int32] = [-1, -1]
        if pipe(&pipeEnds) != 0 {
            let error = POSIXError.error("cannot create the wake-up pipe for", path: "inotify")
            Glibc.close(fd)
            throw error
        }
        wakeRead = pipeEnds[0]
        wakeWrite = pipeEnds[1]
        for end in pipeEnds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
    }

    deinit {
        Glibc.close(fd)
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    /// Watches a folder; returns the watch descriptor (the same one when the folder is watched
    /// already, possibly under another path).
    /// - Throws: `noSuchItem` when the folder is gone, `localIOFailure` with the kernel's reason
    ///   otherwise (`ENOSPC`: the limit `fs.inotify.max_user_watches` is reached).
    package func addWatch(_ path: String, mask: UInt32 = Inotify.folderMask) throws(FileProviderError) -> Int32 {
        let watch = inotify_add_watch(fd, path, mask)
        if watch < 0 {
            let code = errno
            if code == ENOSPC {
                throw FileProviderError(
                    .localIOFailure, "cannot watch \(path): the inotify watch limit is reached (raise fs.inotify.max_user_watches)")
            }
            throw POSIXError.error("cannot watch", path: path, errno: code)
        }
        return watch
    }

    /// Stops a watch; a watch the kernel already dropped is fine.
    package func removeWatch(_ watch: Int32) {
        _ = inotify_rm_watch(fd, watch)
    }

    /// Makes a blocked or the next ``read()`` return an empty list at once.
    package func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite, &byte, 1)
    }

    /// Waits until events arrive or ``wake()`` is called; returns the events (empty after a
    /// wake-up). Blocking.
    /// - Throws: `localIOFailure` when polling or reading fails.
    package func read() throws(FileProviderError) -> [InotifyEvent] {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while true {
            let ready = poll(&fds, 2, -1)
            if ready >= 0 { break }
            if errno != EINTR { throw POSIXError.error("cannot wait for events on", path: "inotify") }
        }
        if fds[1].revents != 0 {
            var drain = [UInt8](repeating: 0, count: 64)
            while Glibc.read(wakeRead, &drain, drain.count) > 0 {}
            return []
        }
        var events: [InotifyEvent] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN { break }
                throw POSIXError.error("cannot read events from", path: "inotify")
            }
            if count == 0 { break }
            events += Self.parse(buffer, count: count)
            if count < buffer.count / 2 { break }
        }
        return events
    }

    /// The events queued within `milliseconds` (as soon as there are some), else none.
    /// Blocking.
    /// - Throws: `localIOFailure` when polling or reading fails.
    package func events(within milliseconds: Int32) throws(FileProviderError) -> [InotifyEvent] {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&ready, 1, milliseconds) < 0 {
            if errno != EINTR { throw POSIXError.error("cannot wait for events on", path: "inotify") }
        }
        return ready.revents == 0 ? [] : try drain()
    }

    /// Whether `events` hold the first half of a rename (`IN_MOVED_FROM`) without its second
    /// (`IN_MOVED_TO`, the same cookie): the kernel queues them one after the other, so a read
    /// can fall between them.
    package static func hasUnpairedMove(_ events: [InotifyEvent]) -> Bool {
        var open = Set<UInt32>()
        for event in events {
            if event.has(IN_MOVED_FROM) {
                open.insert(event.cookie)
            } else if event.has(IN_MOVED_TO) {
                open.remove(event.cookie)
            }
        }
        return !open.isEmpty
    }

    /// The events queued now, without waiting. Blocking (a few reads).
    /// - Throws: `localIOFailure` when reading fails.
    package func drain() throws(FileProviderError) -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN { return events }
                throw POSIXError.error("cannot read events from", path: "inotify")
            }
            if count == 0 { return events }
            events += Self.parse(buffer, count: count)
        }
    }

    /// Splits a buffer of `struct inotify_event` records.
    package static func parse(_ buffer: [UInt8], count: Int) -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        let header = 16
        buffer.withUnsafeBytes { raw in
            var offset = 0
            while offset + header <= count {
                let watch = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let cookie = raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
                let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                var name: String?
                if length > 0, offset + header + length <= count {
                    let bytes = raw[(offset + header)..<(offset + header + length)]
                    let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
                    name = Filename.decode(bytes[bytes.startIndex..<end])
                }
                events.append(InotifyEvent(watch: watch, mask: mask, cookie: cookie, name: name))
                offset += header + length
            }
        }
        return events
    }
}
