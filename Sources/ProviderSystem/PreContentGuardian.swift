import CSystemShims
import Foundation
import ProviderCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The `fileprovider-guard` process that keeps a ``PreContentGroup`` from failing open.
///
/// When the last holder of a pre-content group closes it, the kernel lets every waiting and
/// later access through, and a program reads a file's holes as zeros. The guardian holds a
/// duplicate of the group, so the owner's death (exit, crash, `kill -9`) does not release it.
/// When the owner is gone, the guardian denies with EIO every event the owner had read and not
/// answered, detaches the marked mounts (``ReplicaMount``) and their anchors, denies every
/// later event, and offers the group to a new owner on `<run folder>/guard-<pid>.sock`; it exits
/// once a new owner took the group, or once the group marks nothing (the detached mounts' last
/// users are gone). While its owner lives it answers takeover requests "busy".
/// Sources/fileprovider-guard/main.c describes the protocol.
///
/// The owner's side: ``open(runFolder:executable:)`` takes over a group a guardian kept, or
/// makes a new one, and starts this owner's guardian. Releasing the guardian object (or the
/// process ending) tells the guardian the owner is gone: detach the replica mounts first on a
/// clean stop.
public final class PreContentGuardian: @unchecked Sendable {
    /// The guardian's process id (a child of this process).
    public let processIdentifier: Int32
    /// The folder of the takeover sockets and of `guard.log`.
    public let runFolder: String
    private let channel: Int32
    private let reaped = Mutex<Bool>(false)

    private init(processIdentifier: Int32, runFolder: String, channel: Int32) {
        self.processIdentifier = processIdentifier
        self.runFolder = runFolder
        self.channel = channel
    }

    deinit { Glibc.close(channel) }

    /// A guarded pre-content group.
    public struct Opened: Sendable {
        public let group: PreContentGroup
        public let guardian: PreContentGuardian
        /// Whether the group was taken over from the guardian of an owner that died: its marks
        /// (ignore marks of complete files, marks of detached mounts whose files are still open)
        /// came along, and events from those files arrive too.
        public let adopted: Bool
    }

    /// Takes over the group a guardian in `runFolder` kept after its owner died, or starts a new
    /// group; then starts this owner's guardian for it. Other guardians found there go on until
    /// their last marked file is closed.
    /// A new group's events have writable descriptors with `writableEvents`
    /// (``PreContentGroup/init(writableEvents:)``); an adopted group keeps what it had.
    /// - Throws: what ``PreContentGroup/init(writableEvents:)`` and ``start(guarding:runFolder:executable:)`` throw.
    public static func open(runFolder: String, executable: String? = nil, writableEvents: Bool = false) throws(FileProviderError)
        -> Opened
    {
        try PrivateFolder.make(atPath: runFolder)
        for socket in takeoverSockets(in: runFolder) {
            guard let taken = takeOver(socket) else { continue }
            let group: PreContentGroup
            do { group = try PreContentGroup(adopting: taken.group) } catch {
                Glibc.close(taken.connection)
                continue
            }
            do {
                let guardian = try start(guarding: group, runFolder: runFolder, executable: executable)
                // Our guardian holds the group now: the old one may let it go.
                _ = fp_channel_send(taken.connection, "done", 4, -1)
                Glibc.close(taken.connection)
                return Opened(group: group, guardian: guardian, adopted: true)
            } catch {
                // Closing the connection without "done" gives the group back to the old guardian.
                Glibc.close(taken.connection)
                throw error
            }
        }
        let group = try PreContentGroup(writableEvents: writableEvents)
        return Opened(group: group, guardian: try start(guarding: group, runFolder: runFolder, executable: executable), adopted: false)
    }

    /// Starts a guardian holding a duplicate of `group`, and waits until it is ready.
    /// - Throws: `noSuchItem` when the `fileprovider-guard` executable is not found;
    ///   `localIOFailure` when it cannot be started or does not answer within 10 seconds.
    public static func start(guarding group: PreContentGroup, runFolder: String, executable: String? = nil) throws(FileProviderError)
        -> PreContentGuardian
    {
        guard let binary = executable ?? locateExecutable() else {
            throw FileProviderError(
                .noSuchItem,
                "fileprovider-guard not found next to \(currentExecutable() ?? "this program"), in ../libexec/fileprovider from it or on PATH; install it with 'make install' or set FILEPROVIDER_GUARD"
            )
        }
        try PrivateFolder.make(atPath: runFolder)
        var ends: [Int32] = [-1, -1]
        if fp_channel_pair(&ends) != 0 { throw POSIXError.error("cannot create the channel to", path: binary) }
        let (mine, theirs) = (ends[0], ends[1])
        let arguments = [binary, runFolder, String(descriptorLimit())]
        var cArguments = arguments.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        var pid: Int32 = 0
        let result = fp_spawn_guardian(binary, &cArguments, group.descriptor, theirs, &pid)
        Glibc.close(theirs)
        if result != 0 {
            Glibc.close(mine)
            throw POSIXError.error("cannot start", path: binary, errno: result)
        }
        var message = [UInt8](repeating: 0, count: 64)
        var unexpected: Int32 = -1
        let length = fp_channel_receive(mine, &message, UInt(message.count), &unexpected, 10_000)
        if unexpected >= 0 { Glibc.close(unexpected) }
        let text = length > 0 ? String(decoding: message.prefix(length), as: UTF8.self) : ""
        guard text.hasPrefix("ready ") else {
            let reason = length < 0 ? String(cString: strerror(errno)) : "it exited"
            Glibc.close(mine)
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw FileProviderError(.localIOFailure, "\(binary) did not get ready (\(reason)); see \(runFolder)/guard.log")
        }
        return PreContentGuardian(processIdentifier: pid, runFolder: runFolder, channel: mine)
    }

    /// Whether the guardian still runs (reaps it when it ended). A guardian that ended leaves
    /// the group unguarded: start another.
    public var isRunning: Bool {
        reaped.withLock { reaped in
            if reaped { return false }
            var status: Int32 = 0
            let result = waitpid(processIdentifier, &status, WNOHANG)
            if result == processIdentifier || (result < 0 && errno == ECHILD) {
                reaped = true
                return false
            }
            return true
        }
    }

    /// Tells the guardian this process's descriptor limit (after raising `RLIMIT_NOFILE`): it
    /// answers events for every descriptor number below it when this process dies.
    public func limitChanged() {
        let message = "limit \(Self.descriptorLimit())"
        _ = fp_channel_send(channel, message, UInt(message.utf8.count), -1)
    }

    // MARK: Helpers

    /// The `fileprovider-guard` executable: `$FILEPROVIDER_GUARD`, else beside this process's
    /// executable, in `../libexec/fileprovider` from it (where `make install` puts it), beside
    /// a loaded bundle (the test bundle's build folder), else on `PATH`.
    public static func locateExecutable() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["FILEPROVIDER_GUARD"], !path.isEmpty { return path }
        var folders: [String] = []
        if let executable = currentExecutable() {
            let folder = (executable as NSString).deletingLastPathComponent
            folders += [folder, (folder as NSString).deletingLastPathComponent + "/libexec/fileprovider"]
        }
        folders += Bundle.allBundles.map { $0.bundleURL.deletingLastPathComponent().path }
        folders += (environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for folder in folders {
            let candidate = folder + "/fileprovider-guard"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func currentExecutable() -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }

    /// The soft `RLIMIT_NOFILE`: every descriptor number of this process is below it.
    static func descriptorLimit() -> UInt64 {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return 1 << 20 }
        return min(UInt64(limit.rlim_cur), 1 << 24)
    }

    /// The takeover sockets of guardians in `folder`, newest first (the guardian of the owner
    /// that died last guards the files most likely still open).
    static func takeoverSockets(in folder: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        let paths = names.filter { $0.hasPrefix("guard-") && $0.hasSuffix(".sock") }.map { folder + "/" + $0 }
        func started(_ path: String) -> Int64 {
            var status = stat()
            guard lstat(path, &status) == 0 else { return 0 }
            return Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        }
        return paths.map { ($0, started($0)) }.sorted { $0.1 > $1.1 }.map(\.0)
    }

    /// Asks the guardian listening at `socket` for its group: the group's descriptor and the
    /// open connection (send "done" on it once a new guardian holds the group), or `nil` (the
    /// guardian's owner lives: "busy"). A socket nobody listens on any more is removed.
    private static func takeOver(_ socket: String) -> (group: Int32, connection: Int32)? {
        let connection = fp_channel_connect(socket)
        if connection < 0 {
            if errno == ECONNREFUSED || errno == ENOENT { unlink(socket) }
            return nil
        }
        let request = "take \(descriptorLimit())"
        var message = [UInt8](repeating: 0, count: 64)
        var group: Int32 = -1
        guard fp_channel_send(connection, request, UInt(request.utf8.count), -1) == 0 else {
            Glibc.close(connection)
            return nil
        }
        let length = fp_channel_receive(connection, &message, UInt(message.count), &group, 10_000)
        guard length == 5, String(decoding: message.prefix(5), as: UTF8.self) == "group", group >= 0 else {
            if group >= 0 { Glibc.close(group) }
            Glibc.close(connection)
            return nil
        }
        return (group, connection)
    }
}
