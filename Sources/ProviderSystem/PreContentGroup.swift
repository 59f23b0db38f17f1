import CSystemShims
import Foundation
import ProviderCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A fanotify pre-content group (Linux 6.14's "HSM" events): a program's read, write, truncate,
/// `mmap` or exec of a file on a marked mount waits until this group answers, so the contents
/// can be fetched first. Every fanotify call of the engine goes through this type (and the C
/// shim, `precontent.c`); errors become ``FileProviderError`` in one place, ``failure(_:path:errno:)``.
///
/// Needs `CAP_SYS_ADMIN`. Marks go on mounts (``markMount(_:)``), never on the folder the engine
/// itself reads and writes: an access of this process through a marked mount waits on its own
/// event. ``ReplicaMount`` makes such a mount.
///
/// Threads: ``nextEvents(max:)`` blocks; call it from one thread of its own, never from Swift's
/// cooperative pool. Everything else may be called from any thread. Every event must be
/// answered (``respond(_:_:)``), or the program waits until the group closes, which lets it
/// read what is on disk: run a ``PreContentGuardian`` beside the group so that never happens.
public final class PreContentGroup: @unchecked Sendable {
    /// One access a program waits on.
    public struct Event: Sendable, Hashable, CustomStringConvertible {
        /// What the event is about.
        public enum Kind: Sendable, Hashable {
            /// A read, write, truncate, `fallocate`, `mmap` or exec needs the bytes in
            /// `offset..<offset+count` (page-aligned, and possibly past the end of the file).
            /// A `count` of 0 needs no bytes: a truncate to 0 (`truncate -s 0`) or a read at
            /// the end of the file. Truncating a file while opening it (`O_TRUNC`, `> file`)
            /// raises no event of its own: the next write's event finds the file already empty.
            case access
            /// A program wrote into the file (`FAN_MODIFY`) or closed it after opening it for
            /// writing (`FAN_CLOSE_WRITE`, which also covers writes through `mmap`): a
            /// notification, nothing waits for its answer.
            case modified
            /// A program is opening the file (`FAN_OPEN_PERM`): the open waits for the answer,
            /// and needs no bytes (the handler fills a small file whole then).
            case opening
            /// A program opened the file (`FAN_OPEN`): a notification, for when it was last used.
            case opened
            /// An event of another kind (`mask`), from a mark other than ``PreContentGroup``'s.
            case other
        }

        /// The accessed file, opened by the kernel for this process (read-write, close-on-exec;
        /// reading or writing it raises no event). Valid until the event is answered.
        public let fileDescriptor: Int32
        /// The process whose access waits.
        public let processIdentifier: Int32
        /// The fanotify mask (`FAN_PRE_ACCESS`, ...).
        public let mask: UInt64
        /// The byte range the access needs (both 0 when the kernel sent none).
        public let offset: UInt64
        public let count: UInt64
        /// Tells events apart when the kernel reuses a descriptor number.
        let serial: UInt64

        public var kind: Kind {
            if mask & UInt64(FAN_PRE_ACCESS) != 0 { return .access }
            if mask & UInt64(FAN_OPEN_PERM) != 0 { return .opening }
            if mask & UInt64(FAN_MODIFY | FAN_CLOSE_WRITE) != 0 { return .modified }
            if mask & UInt64(FAN_OPEN) != 0 { return .opened }
            return .other
        }

        /// Whether the event waits for an answer (a permission event).
        public var needsAnswer: Bool { mask & UInt64(FAN_PRE_ACCESS | FAN_OPEN_PERM | FAN_ACCESS_PERM | FAN_OPEN_EXEC_PERM) != 0 }

        /// Whether the access needs no existing bytes (`count` is 0).
        public var needsNoBytes: Bool { count == 0 }

        public var description: String {
            "fanotify event fd \(fileDescriptor) pid \(processIdentifier) mask 0x\(String(mask, radix: 16)) range \(offset)+\(count)"
        }
    }

    /// How to answer an event.
    public enum Response: Sendable, Hashable {
        /// The access goes on and sees what is on disk now.
        case allow
        /// The access fails with this error.
        case deny(DenyReason)
    }

    /// The errors an access may be failed with (the kernel accepts these only).
    public struct DenyReason: Sendable, Hashable, CustomStringConvertible {
        public let errno: Int32
        private init(_ code: Int32) { errno = code }

        /// EIO, "Input/output error": the contents could not be fetched.
        public static let ioError = DenyReason(EIO)
        /// ENOSPC, "No space left on device": the local disk is full.
        public static let noSpace = DenyReason(ENOSPC)
        /// EDQUOT, "Disk quota exceeded".
        public static let quota = DenyReason(EDQUOT)
        /// EPERM, "Operation not permitted".
        public static let permission = DenyReason(EPERM)
        /// EBUSY, "Device or resource busy".
        public static let busy = DenyReason(EBUSY)
        /// EAGAIN, "Resource temporarily unavailable".
        public static let tryAgain = DenyReason(EAGAIN)

        public var description: String { String(cString: strerror(errno)) }
    }

    /// The group's descriptor (handed to the guardian).
    let descriptor: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Events read and not answered yet: serial by descriptor.
    private let pending = Mutex<(serials: [Int32: UInt64], next: UInt64)>(([:], 1))

    /// Starts a new group. With `writableEvents` the events' descriptors are open for writing
    /// (``write(_:at:through:)``); without, they are read-only and do not count as writers of
    /// the file (the engine writes by path, and takes a read lease to complete a file while a
    /// program's access waits).
    /// - Throws: `permissionDenied` without `CAP_SYS_ADMIN`; `notSupported` when the kernel has
    ///   no permission events; `localIOFailure` otherwise.
    public convenience init(writableEvents: Bool = false) throws(FileProviderError) {
        let fd = fp_precontent_init(writableEvents ? 1 : 0)
        if fd < 0 { throw Self.failure("cannot start a fanotify pre-content group for", path: "on-access files", errno: errno) }
        try self.init(adopting: fd)
    }

    /// Takes ownership of `descriptor`, a pre-content group (from a guardian that kept it).
    /// - Throws: `invalidArgument` when it is not a fanotify group; `localIOFailure` when the
    ///   wake-up pipe cannot be made. The descriptor is closed on failure.
    init(adopting descriptor: Int32) throws(FileProviderError) {
        guard fp_is_fanotify(descriptor) != 0 else {
            Glibc.close(descriptor)
            throw FileProviderError(.invalidArgument, "descriptor \(descriptor) is not a fanotify group")
        }
        var ends: [Int32] = [-1, -1]
        if pipe2(&ends, O_CLOEXEC | O_NONBLOCK) != 0 {
            let error = Self.failure("cannot create the wake-up pipe for", path: "fanotify", errno: errno)
            Glibc.close(descriptor)
            throw error
        }
        // Non-blocking for this process and the guardian alike (they share the open file).
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        self.descriptor = descriptor
        (wakeRead, wakeWrite) = (ends[0], ends[1])
    }

    deinit {
        // Unanswered events would wait for the group's end; deny them rather than leave them.
        for fd in pending.withLock({ Array($0.serials.keys) }) {
            _ = fp_precontent_respond(descriptor, fd, EIO)
            Glibc.close(fd)
        }
        Glibc.close(descriptor)
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    // MARK: Marks

    /// Asks for an event before every access to a file on the mount `path` is on.
    /// - Throws: `notSupported` when the kernel (before 6.14) or the file system (tmpfs,
    ///   overlayfs, ...) refuses; `noSuchItem` when `path` is missing; `permissionDenied`.
    public func markMount(_ path: String) throws(FileProviderError) {
        if fp_precontent_mark_mount(descriptor, AT_FDCWD, path, 1) != 0 {
            throw Self.failure("cannot mark the mount of", path: path, errno: errno)
        }
    }

    /// Marks the mount `tree` is an `O_PATH` descriptor of (a detached mount, before it is
    /// attached anywhere: no program can reach it unmarked).
    func markMount(tree: Int32, describedAs path: String) throws(FileProviderError) {
        if fp_precontent_mark_mount(descriptor, tree, ".", 1) != 0 {
            throw Self.failure("cannot mark the mount of", path: path, errno: errno)
        }
    }

    /// Stops the events of a mount marked with ``markMount(_:)``; a mount not marked is fine.
    /// - Throws: `noSuchItem` when `path` is missing; `localIOFailure` otherwise.
    public func unmarkMount(_ path: String) throws(FileProviderError) {
        if fp_precontent_mark_mount(descriptor, AT_FDCWD, path, 0) != 0 && errno != ENOENT {
            throw Self.failure("cannot unmark the mount of", path: path, errno: errno)
        }
    }

    /// Asks for an event before every access to the file at `path` (an inode mark: through any
    /// path, mount or mount namespace, the backing path included, so this process's own
    /// accesses raise events too). The alternative to mount marks that also guards copies of
    /// the mount in mount namespaces made later; each mark keeps the file's inode in memory.
    /// - Throws: `noSuchItem` when the file is missing; `notSupported` when the kernel or the
    ///   file system refuses; `localIOFailure` otherwise.
    public func markFile(_ path: String) throws(FileProviderError) {
        if fp_precontent_mark_inode(descriptor, AT_FDCWD, path, 1) != 0 {
            throw Self.failure("cannot mark", path: path, errno: errno)
        }
    }

    /// Stops the events of a file marked with ``markFile(_:)``; a file not marked is fine.
    /// - Throws: `noSuchItem` when the file is missing; `localIOFailure` otherwise.
    public func unmarkFile(_ path: String) throws(FileProviderError) {
        if fp_precontent_mark_inode(descriptor, AT_FDCWD, path, 0) != 0 && errno != ENOENT {
            throw Self.failure("cannot unmark", path: path, errno: errno)
        }
    }

    /// Stops events for the file at `path` (an ignore mark on its inode; give the unmarked
    /// backing path, never a path through a marked mount): its later accesses run at native
    /// speed. For a file whose contents are complete. An `evictable` mark goes away when the
    /// kernel drops the inode from its cache (the next access then raises an event again), so
    /// millions of complete files do not pin millions of inodes.
    /// - Throws: `noSuchItem` when the file is missing; `localIOFailure` otherwise.
    public func ignore(_ path: String, evictable: Bool = true) throws(FileProviderError) {
        if fp_precontent_ignore(descriptor, AT_FDCWD, path, 1, evictable ? 1 : 0) != 0 {
            throw Self.failure("cannot stop the events of", path: path, errno: errno)
        }
    }

    /// ``ignore(_:evictable:)`` for the file an event is about.
    /// - Throws: `localIOFailure` when the kernel refuses.
    public func ignore(_ event: Event, evictable: Bool = true) throws(FileProviderError) {
        if fp_precontent_ignore(descriptor, event.fileDescriptor, nil, 1, evictable ? 1 : 0) != 0 {
            throw Self.failure("cannot stop the events of", path: "the file of \(event)", errno: errno)
        }
    }

    /// Makes accesses to the file at `path` raise events again (before its contents are
    /// punched out). A file without an ignore mark is fine.
    /// - Throws: `noSuchItem` when the file is missing; `localIOFailure` otherwise.
    public func unignore(_ path: String) throws(FileProviderError) {
        if fp_precontent_ignore(descriptor, AT_FDCWD, path, 0, 0) != 0 && errno != ENOENT {
            throw Self.failure("cannot restore the events of", path: path, errno: errno)
        }
    }

    // MARK: Events

    /// Waits until events are queued or ``wake()`` is called; returns at most `max` events
    /// (empty after a wake-up). Blocking: one thread of its own, never Swift's cooperative
    /// pool; one caller at a time.
    /// - Throws: `localIOFailure` when waiting or reading fails.
    public func nextEvents(max: Int = 64) throws(FileProviderError) -> [Event] {
        var fds = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        var raw = [fp_precontent_event](repeating: fp_precontent_event(), count: Swift.max(1, Swift.min(max, 1024)))
        while true {
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                throw Self.failure("cannot wait for events of", path: "fanotify", errno: errno)
            }
            if fds[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                while Glibc.read(wakeRead, &drain, drain.count) > 0 {}
                return []
            }
            let count = fp_precontent_read(descriptor, &raw, Int32(raw.count))
            if count < 0 {
                if errno == EINTR { continue }
                throw Self.failure("cannot read events of", path: "fanotify", errno: errno)
            }
            // Another reader (the guardian, during a takeover) may have taken them.
            if count == 0 { continue }
            return pending.withLock { pending in
                raw.prefix(Int(count)).compactMap { event -> Event? in
                    guard event.fd >= 0 else { return nil }
                    defer { pending.next += 1 }
                    pending.serials[event.fd] = pending.next
                    return Event(
                        fileDescriptor: event.fd, processIdentifier: event.pid, mask: event.mask, offset: event.offset,
                        count: event.count, serial: pending.next)
                }
            }
        }
    }

    /// Makes a blocked or the next ``nextEvents(max:)`` return an empty list at once. Any thread.
    public func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite, &byte, 1)
    }

    /// Answers an event and closes its descriptor: the program's access goes on or fails.
    /// Answering an event twice does nothing the second time.
    /// - Throws: `localIOFailure` when the kernel refuses the answer (the event is then
    ///   answered by the guardian or when the group closes, with EIO).
    public func respond(_ event: Event, _ response: Response) throws(FileProviderError) {
        let mine = pending.withLock { pending -> Bool in
            guard pending.serials[event.fileDescriptor] == event.serial else { return false }
            pending.serials[event.fileDescriptor] = nil
            return true
        }
        guard mine else { return }
        let code: Int32
        switch response {
        case .allow: code = 0
        case .deny(let reason): code = reason.errno
        }
        let result = fp_precontent_respond(descriptor, event.fileDescriptor, code)
        let failure = errno
        Glibc.close(event.fileDescriptor)
        if result != 0 { throw Self.failure("cannot answer", path: "\(event)", errno: failure) }
    }

    /// Closes the descriptor of a notification event (``Event/needsAnswer`` false), which needs
    /// no answer. Closing one twice does nothing the second time.
    public func dismiss(_ event: Event) {
        let mine = pending.withLock { pending -> Bool in
            guard pending.serials[event.fileDescriptor] == event.serial else { return false }
            pending.serials[event.fileDescriptor] = nil
            return true
        }
        if mine { Glibc.close(event.fileDescriptor) }
    }

    /// Writes `bytes` into the event's file at `offset` (raising no event). The group must have
    /// been started with `writableEvents`.
    /// - Throws: `fileWriteOutOfSpace` when the disk is full; `localIOFailure` otherwise.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64, through event: Event) throws(FileProviderError) {
        guard var position = off_t(exactly: offset) else {
            throw FileProviderError(.invalidArgument, "offset \(offset) is beyond what a file can hold")
        }
        var rest = bytes
        while !rest.isEmpty {
            let written = pwrite(event.fileDescriptor, rest.baseAddress, rest.count, position)
            if written < 0 {
                if errno == EINTR { continue }
                throw POSIXError.localWriteError("cannot write into", path: "the file of \(event)")
            }
            if written == 0 { throw FileProviderError(.localIOFailure, "cannot write into the file of \(event): no progress") }
            rest = UnsafeRawBufferPointer(rebasing: rest[written...])
            position += off_t(written)
        }
    }

    /// The path of the event's file as this process sees it (through the mount the access came
    /// from; a detached mount's files show their path inside it), or `nil`.
    public func path(of event: Event) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/fd/\(event.fileDescriptor)", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// How many events are read and not answered.
    public var unansweredCount: Int { pending.withLock { $0.serials.count } }

    // MARK: Errors

    /// The error for a failed fanotify call: the one place errno becomes a ``FileProviderError``.
    static func failure(_ operation: String, path: String, errno code: Int32) -> FileProviderError {
        let text = "\(operation) \(path): \(String(cString: strerror(code)))"
        switch code {
        case EPERM, EACCES:
            return FileProviderError(.permissionDenied, text + " (fanotify pre-content events need CAP_SYS_ADMIN: run as root)")
        case EINVAL, EOPNOTSUPP, ENODEV, EXDEV, ENOSYS:
            return FileProviderError(
                .notSupported,
                text + " (needs Linux 6.14 or later and a file system that accepts pre-content marks: ext4, xfs, btrfs or bcachefs)")
        case ENOENT, ENOTDIR: return FileProviderError(.noSuchItem, text)
        default: return FileProviderError(.localIOFailure, text)
        }
    }
}
