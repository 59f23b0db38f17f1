import CFUSE
import Foundation
import ProviderCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A FUSE file system mounted on a folder, serving a ``FUSEFileSystem`` through libfuse 3's
/// low-level API: what the FUSE replica layout runs under.
///
/// ``mount(_:at:options:)`` mounts (through the setuid `fusermount3` as an ordinary user, and
/// always with ``FUSEMountOptions/autoUnmount``), and serves requests on threads of its own
/// (libfuse's multi-threaded loop; never Swift's cooperative pool) until ``unmount()``, or
/// until someone else unmounts the folder. When this process dies, however it dies, the kernel
/// fails every waiting and later request of a program with `ENOTCONN` (never zeros) and
/// `fusermount3` unmounts.
///
/// Everything the kernel may cache it caches long (``FUSEMountOptions``): when a sync changes
/// an item, tell it with ``invalidate(inode:)`` and ``invalidate(entry:in:)``.
///
/// libfuse is loaded with `dlopen` at the first mount (`libfuse3.so.3`, Debian's `fuse3`): a
/// program linking this module starts without it.
public final class FUSESession: @unchecked Sendable {
    /// The folder the file system is mounted on.
    public let mountPoint: String
    public let options: FUSEMountOptions
    let fileSystem: any FUSEFileSystem
    /// libfuse's session (`struct fuse_session *`): set once by ``mount(_:at:options:)`` before
    /// the loop starts, never changed.
    private var session: OpaquePointer?
    /// Whether the kernel granted the writeback cache (set at INIT, before any open).
    let writebackGranted = Atomic<Bool>(false)
    /// Whether the kernel was told the file system handles killing privileges
    /// (``FUSEMountOptions/handlesKillPrivileges``; set at INIT).
    let killPrivilegesGranted = Atomic<Bool>(false)
    /// libfuse's session, for the INIT callback (which runs on the loop, after ``session`` is set).
    var libfuseSession: OpaquePointer? { session }
    private let state = Mutex<State>(State())
    /// Signalled (and signalled again by each waiter) once the loop has returned.
    private let ended = DispatchSemaphore(value: 0)

    private struct State {
        /// The thread running libfuse's loop, once it runs.
        var loopThread: pthread_t?
        /// What the loop returned (0, or a negative errno), once it did.
        var loopResult: Int32?
        /// Whether ``unmount()`` started.
        var unmounting = false
        /// Whether libfuse's session is gone (after ``unmount()``).
        var destroyed = false
    }

    private init(fileSystem: any FUSEFileSystem, mountPoint: String, options: FUSEMountOptions) {
        self.fileSystem = fileSystem
        self.mountPoint = mountPoint
        self.options = options
    }

    /// Mounts `fileSystem` on the empty folder `mountPoint`, starts serving it, and returns once
    /// the mount answers a `stat` of its root (``FUSEFileSystem/attributes(of:descriptor:by:)``
    /// of inode 1). Blocks (`fusermount3` runs): call it from a thread of your own, never Swift's
    /// cooperative pool. The file system must never reach its own files through the mount (a
    /// backing folder under the mount point waits on itself).
    /// - Throws: `notSupported` when libfuse 3 cannot be loaded, `/dev/fuse` does not exist or
    ///   `fusermount3` is not installed; `permissionDenied` when this user cannot open
    ///   `/dev/fuse`; `noSuchItem` when `mountPoint` does not exist; `invalidArgument` when it
    ///   is not an empty folder or is a mount point already (a dead mount of the same subtype,
    ///   left by a process killed before `fusermount3` removed it, is detached first), or
    ///   libfuse refuses the options;
    ///   `permissionDenied`/`localIOFailure` with libfuse's words when the mount fails (for
    ///   ``FUSEMountOptions/allowOther`` without `user_allow_other` in `/etc/fuse.conf`, say);
    ///   `localIOFailure` when the mounted file system does not answer that `stat` (the kernel
    ///   refused libfuse's answer to its first request; unmounted again). Each message says
    ///   what to do.
    public static func mount(_ fileSystem: some FUSEFileSystem, at mountPoint: String, options: FUSEMountOptions)
        throws(FileProviderError) -> FUSESession
    {
        try FUSEMountCheck.check(mountPoint, options: options)
        let instance = FUSESession(fileSystem: fileSystem, mountPoint: mountPoint, options: options)
        fp_fuse_clear_log()
        var arguments: [UnsafeMutablePointer<CChar>?] = (["fileprovider"] + options.arguments).map { strdup($0) }
        defer { arguments.forEach { free($0) } }
        var operations = FUSEOperations.table
        let userData = Unmanaged.passUnretained(instance).toOpaque()
        guard let session = fp_fuse_session_new(Int32(arguments.count), &arguments, &operations, userData) else {
            throw FileProviderError(
                .invalidArgument, "libfuse refused the mount options \(options.arguments.joined(separator: " ")): \(lastLog())")
        }
        guard fp_fuse_session_mount(session, mountPoint) == 0 else {
            fp_fuse_session_destroy(session)
            throw mountFailure(mountPoint, options: options)
        }
        // Asked for by hand (libfuse 3.14 has no capability for it); a session that cannot use
        // custom I/O goes on without it.
        if options.handlesKillPrivileges { _ = fp_fuse_handle_killpriv(session) }
        instance.session = session
        instance.startLoop()
        // The kernel's first request (INIT) is answered by the loop; a `stat` of the root goes
        // through it (the file system's `attributes(of: 1)`), so a session the kernel refused
        // (ECONNREFUSED) fails here, not at a program's first access.
        var status = stat()
        if stat(mountPoint, &status) != 0 {
            let code = errno
            instance.unmount()
            throw FileProviderError(
                .localIOFailure,
                "the FUSE file system mounted on \(mountPoint) does not answer (\(String(cString: strerror(code)))): \(lastLog())")
        }
        return instance
    }

    /// Whether the file system still serves (neither ``unmount()`` nor an unmount by someone
    /// else ended it).
    public var isServing: Bool { state.withLock { $0.loopResult == nil && !$0.unmounting } }

    /// Stops serving and unmounts (lazily where programs still use the folder: they keep what
    /// they opened, which fails with `ENOTCONN`). Returns when the loop's threads are gone and
    /// the requests they had are answered. Blocks: call it from a thread of your own. Calling
    /// it again does nothing.
    public func unmount() {
        let first = state.withLock { state -> Bool in
            defer { state.unmounting = true }
            return !state.unmounting
        }
        guard first, let session else {
            waitUntilEnded()
            return
        }
        fp_fuse_session_exit(session)
        // The loop waits in sem_wait for a worker to see the exit flag; a worker waits in read
        // on /dev/fuse until the next request. The wake-up signal ends the first wait (again
        // until it is in it).
        while ended.wait(timeout: .now() + .milliseconds(20)) == .timedOut {
            if let thread = state.withLock({ $0.loopThread }) { fp_fuse_wake_loop(thread) }
        }
        ended.signal()
        state.withLock { $0.destroyed = true }
        fp_fuse_session_unmount(session)
        fp_fuse_session_destroy(session)
    }

    /// Waits until the loop has returned (after ``unmount()``, or an unmount by someone else:
    /// `fusermount3 -u`). Blocks: call it from a thread of your own.
    public func waitUntilEnded() {
        ended.wait()
        ended.signal()
    }

    /// Tells the kernel to forget what it cached of `inode`: its attributes and every byte of
    /// its contents (a sync changed the item). Call it from a thread other than the session's
    /// (never from inside a ``FUSEFileSystem`` method about the same item: the kernel may wait
    /// for that request first).
    /// - Throws: the kernel's error, except `ENOENT` (the kernel holds nothing of the inode:
    ///   nothing to forget) and after ``unmount()`` (nothing is cached any more).
    public func invalidate(inode: UInt64) throws(FUSEError) {
        try notify { fp_fuse_notify_inval_inode($0, fuse_ino_t(inode), 0, 0) }
    }

    /// Tells the kernel to forget the name `name` in the folder `parent` (an item was added,
    /// removed or renamed there by a sync), and the listing of `parent` with it. Threads as
    /// ``invalidate(inode:)``.
    /// - Throws: as ``invalidate(inode:)``.
    public func invalidate(entry name: FUSEName, in parent: UInt64) throws(FUSEError) {
        try notify { session in
            name.bytes.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) {
                    fp_fuse_notify_inval_entry(session, fuse_ino_t(parent), $0.baseAddress, $0.count)
                }
            }
        }
    }

    private func notify(_ call: (OpaquePointer) -> Int32) throws(FUSEError) {
        guard let session, !state.withLock({ $0.destroyed }) else { return }
        let result = call(session)
        if result < 0 && result != -ENOENT { throw FUSEError(code: -result) }
    }

    /// Runs libfuse's loop on a thread of its own.
    private func startLoop() {
        let thread = Thread { [self] in
            state.withLock { $0.loopThread = pthread_self() }
            let result = fp_fuse_loop_mt(session, options.maximumThreads, options.idleThreads)
            state.withLock { $0.loopResult = result }
            ended.signal()
        }
        thread.name = "fuse \(options.name)"
        thread.start()
    }

    /// libfuse's last message, or a general one.
    private static func lastLog() -> String {
        let message = String(cString: fp_fuse_last_log())
        return message.isEmpty ? "libfuse gave no reason" : message
    }

    private static func mountFailure(_ mountPoint: String, options: FUSEMountOptions) -> FileProviderError {
        let reason = lastLog()
        if reason.contains("user_allow_other") {
            return FileProviderError(
                .permissionDenied,
                "cannot mount \(mountPoint) for other users too (allow_other): \(reason); as root, add the line user_allow_other to /etc/fuse.conf"
            )
        }
        if reason.contains("ermission denied") || reason.contains("not permitted") {
            return FileProviderError(
                .permissionDenied,
                "cannot mount \(mountPoint): \(reason); an ordinary user mounts through the setuid fusermount3 (check `ls -l $(command -v fusermount3)` shows -rwsr-xr-x root) and needs write access to the folder"
            )
        }
        return FileProviderError(.localIOFailure, "cannot mount a FUSE file system on \(mountPoint): \(reason)")
    }
}
