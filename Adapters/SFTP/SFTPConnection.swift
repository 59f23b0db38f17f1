import CLibSSH2
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

// The SFTP half of the libssh2 layer (see SSHSession.swift), with SFTPFile.swift: every
// libssh2_sftp_* call. SFTPChannel.swift speaks SFTP itself on a second channel where
// libssh2's SFTP API falls short.

/// One SFTP connection: an SSH session with its SFTP channel. Used by one thread at a time.
final class SFTPConnection: @unchecked Sendable {
    let session: SSHSession
    private let sftp: OpaquePointer
    /// `host:port` of the server, for messages.
    var endpoint: String { session.settings.endpoint }
    /// The absolute path of the root on the server, symlinks resolved.
    private(set) var rootPath: String = "/"
    /// The connection failed at the transport level; the pool drops it.
    private(set) var isDead = false
    /// libssh2 calls made since the current operation began.
    private(set) var callsInOperation = 0
    /// Whether the connection has run an operation before the current one.
    private(set) var hasBeenUsed = false
    /// OpenSSH's sftp-server takes SSH_FXP_SYMLINK's two paths in reverse order.
    let symlinkArgumentsReversed: Bool
    private var extensions: SFTPChannel?
    private var extensionsFailed = false
    /// The channel through `ssh` for large transfers (``transferChannel()``).
    private var transfers: SFTPChannel?
    private var transfersThroughSSHFailed = false

    /// Connects, authenticates, starts SFTP and resolves the root folder.
    ///
    /// - Throws: what ``SSHSession/init(settings:)`` throws; `serverUnreachable` when the server
    ///   offers no SFTP; `noSuchItem` when the root folder does not exist on the server;
    ///   `invalidArgument` when it is not a folder.
    init(settings: ConnectionSettings) throws(FileProviderError) {
        session = try SSHSession(settings: settings)
        guard let sftp = libssh2_sftp_init(session.raw) else {
            throw session.transportError(session.lastErrorCode, "starting SFTP on \(settings.endpoint)")
        }
        self.sftp = sftp
        symlinkArgumentsReversed = session.banner.contains("OpenSSH")
        let root = try realpath(settings.rootPath)
        let attributes = try stat(root)
        guard attributes.kind == .folder else {
            throw FileProviderError(.invalidArgument, "the root \(settings.rootPath) on \(settings.endpoint) is not a folder")
        }
        rootPath = root
        callsInOperation = 0
    }

    deinit {
        extensions?.sessionIsDead = isDead
        extensions = nil
        if !isDead { libssh2_sftp_shutdown(sftp) }
    }

    /// Marks the start of an operation (for the pool's retry rule).
    func beginOperation() {
        if callsInOperation > 0 { hasBeenUsed = true }
        callsInOperation = 0
    }

    /// Whether the connection died on the first call of the current operation, on a connection
    /// that had worked before: nothing reached the server, the operation may run again.
    var diedBeforeDoingAnything: Bool { isDead && hasBeenUsed && callsInOperation <= 1 }

    func count() { callsInOperation += 1 }

    /// Gives the connection up after the server broke the SFTP protocol on it (a reply longer
    /// than asked, lengths that disagree): what follows on the channel cannot be trusted, so
    /// the pool replaces the connection.
    func abandon() { isDead = true }

    /// The error for the last failed call, marking the connection dead for transport errors.
    ///
    /// An SFTP protocol error without a failure status from the server (libssh2's last status
    /// is `SSH_FX_OK`) is a reply libssh2 found malformed — a read answered with more bytes
    /// than asked, say: `corruptData`, and the connection is given up (libssh2's state after
    /// it is not to be trusted).
    func failure(_ operation: String, path: String) -> FileProviderError {
        let code = session.lastErrorCode
        if code == LIBSSH2_ERROR_SFTP_PROTOCOL {
            let status = libssh2_sftp_last_error(sftp)
            if status == UInt(LIBSSH2_FX_OK) {
                isDead = true
                return FileProviderError(
                    .corruptData,
                    "\(operation) \(path): the server sent a malformed SFTP reply (\(SSHSession.lastMessage(session.raw)))")
            }
            return SFTPStatus.error(status, operation: operation, path: path)
        }
        isDead = true
        return session.transportError(code, "\(operation) \(path) on \(session.settings.endpoint)")
    }

    // MARK: Paths

    private func withPath<T>(_ path: String, _ body: (UnsafePointer<CChar>, UInt32) -> T) -> T {
        path.withCString { body($0, UInt32(path.utf8.count)) }
    }

    private static func text(_ buffer: [CChar], _ length: Int32) -> String {
        String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The absolute path with symlinks resolved.
    func realpath(_ path: String) throws(FileProviderError) -> String {
        count()
        var buffer = [CChar](repeating: 0, count: 8192)
        let length = withPath(path) { pointer, length in
            libssh2_sftp_symlink_ex(sftp, pointer, length, &buffer, UInt32(buffer.count), LIBSSH2_SFTP_REALPATH)
        }
        if length < 0 {
            let error = failure("resolve", path: path)
            // libssh2 1.10 reports a wrong status for a failed REALPATH (seen: 2, 3, 4, 5, 289,
            // 399 for one missing folder): lstat says why, and a missing path is `noSuchItem`.
            if !isDead, error.code != .noSuchItem { _ = try lstat(path) }
            throw error
        }
        return Self.text(buffer, length)
    }

    /// The target of a symlink (bytes that are not UTF-8 are replaced).
    func readlink(_ path: String) throws(FileProviderError) -> String {
        count()
        var buffer = [CChar](repeating: 0, count: 8192)
        let length = withPath(path) { pointer, length in
            libssh2_sftp_symlink_ex(sftp, pointer, length, &buffer, UInt32(buffer.count), LIBSSH2_SFTP_READLINK)
        }
        if length < 0 { throw failure("read the link", path: path) }
        return Self.text(buffer, length)
    }

    /// Makes a symlink at `path` pointing to `target`.
    ///
    /// Sent on the raw channel: libssh2 1.10 mixes up the reply of SSH_FXP_SYMLINK after an
    /// earlier REALPATH on the same channel (it reports a failure for a link it made).
    func symlink(_ path: String, target: String) throws(FileProviderError) {
        let (first, second) = symlinkArgumentsReversed ? (target, path) : (path, target)
        if let channel = try extensionChannel() {
            count()
            let status = try channel.request(packetType: 20, [Array(first.utf8), Array(second.utf8)], on: self)
            if status != 0 { throw SFTPStatus.error(UInt(status), operation: "make the link", path: path) }
            return
        }
        count()
        let rc = first.withCString { a in
            second.withCString { b in
                libssh2_sftp_symlink_ex(
                    sftp, a, UInt32(first.utf8.count), UnsafeMutablePointer(mutating: b), UInt32(second.utf8.count),
                    LIBSSH2_SFTP_SYMLINK)
            }
        }
        if rc < 0 { throw failure("make the link", path: path) }
    }

    private func stat(_ path: String, type: Int32) throws(FileProviderError) -> RemoteAttributes {
        count()
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        let rc = withPath(path) { pointer, length in libssh2_sftp_stat_ex(sftp, pointer, length, type, &attributes) }
        if rc != 0 { throw failure("stat", path: path) }
        return RemoteAttributes(attributes)
    }

    /// The attributes of `path`, following a final symlink.
    func stat(_ path: String) throws(FileProviderError) -> RemoteAttributes { try stat(path, type: LIBSSH2_SFTP_STAT) }

    /// The attributes of `path` itself, never following a final symlink.
    func lstat(_ path: String) throws(FileProviderError) -> RemoteAttributes { try stat(path, type: LIBSSH2_SFTP_LSTAT) }

    /// The attributes of `path`, or `nil` when nothing is there.
    func lstatIfPresent(_ path: String) throws(FileProviderError) -> RemoteAttributes? {
        do throws(FileProviderError) {
            return try lstat(path)
        } catch  where error.code == .noSuchItem {
            return nil
        }
    }

    /// Sets the access and modification times of `path`.
    func setTimes(_ path: String, modification: Int64, access: Int64) throws(FileProviderError) {
        count()
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        attributes.flags = UInt(LIBSSH2_SFTP_ATTR_ACMODTIME)
        attributes.mtime = UInt(truncatingIfNeeded: modification)
        attributes.atime = UInt(truncatingIfNeeded: access)
        let rc = withPath(path) { pointer, length in
            libssh2_sftp_stat_ex(sftp, pointer, length, LIBSSH2_SFTP_SETSTAT, &attributes)
        }
        if rc != 0 { throw failure("set the dates of", path: path) }
    }

    /// Sets the permission bits of `path` (SETSTAT of the permissions attribute).
    func setPermissions(_ path: String, _ permissions: UInt32) throws(FileProviderError) {
        count()
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        attributes.flags = UInt(LIBSSH2_SFTP_ATTR_PERMISSIONS)
        attributes.permissions = UInt(permissions & 0o7777)
        let rc = withPath(path) { pointer, length in
            libssh2_sftp_stat_ex(sftp, pointer, length, LIBSSH2_SFTP_SETSTAT, &attributes)
        }
        if rc != 0 { throw failure("set the mode of", path: path) }
    }

    func mkdir(_ path: String, mode: Int = 0o755) throws(FileProviderError) {
        count()
        let rc = withPath(path) { pointer, length in libssh2_sftp_mkdir_ex(sftp, pointer, length, mode) }
        if rc != 0 { throw failure("make the folder", path: path) }
    }

    func rmdir(_ path: String) throws(FileProviderError) {
        count()
        let rc = withPath(path) { pointer, length in libssh2_sftp_rmdir_ex(sftp, pointer, length) }
        if rc != 0 { throw failure("remove the folder", path: path) }
    }

    func unlink(_ path: String) throws(FileProviderError) {
        count()
        let rc = withPath(path) { pointer, length in libssh2_sftp_unlink_ex(sftp, pointer, length) }
        if rc != 0 { throw failure("remove", path: path) }
    }

    /// Renames with SFTP's plain rename, which never replaces an existing item on OpenSSH.
    func rename(_ source: String, to target: String) throws(FileProviderError) {
        count()
        let flags = LIBSSH2_SFTP_RENAME_ATOMIC | LIBSSH2_SFTP_RENAME_NATIVE
        let rc = source.withCString { a in
            target.withCString { b in
                libssh2_sftp_rename_ex(sftp, a, UInt32(source.utf8.count), b, UInt32(target.utf8.count), Int(flags))
            }
        }
        if rc != 0 { throw failure("rename \(source) to", path: target) }
    }

    /// Renames over an existing file atomically with `posix-rename@openssh.com`; `false` when
    /// the server does not offer it.
    func posixRename(_ source: String, to target: String) throws(FileProviderError) -> Bool {
        guard let channel = try extensionChannel(), channel.offers("posix-rename@openssh.com") else { return false }
        count()
        let name = Array("posix-rename@openssh.com".utf8)
        let status = try channel.request(packetType: 200, [name, Array(source.utf8), Array(target.utf8)], on: self)
        if status != 0 { throw SFTPStatus.error(UInt(status), operation: "rename \(source) to", path: target) }
        return true
    }

    /// The second channel if it is open, without opening it.
    var openExtensionChannel: SFTPChannel? { extensions }

    /// The channel large transfers went over if it is open (through `ssh`, else the second
    /// channel), without opening it.
    var openTransferChannel: SFTPChannel? { transfers ?? extensions }

    /// Every channel of the connection open now (the second channel, the one through `ssh`),
    /// without opening any: each keeps its own files open for ranged reads.
    var openChannels: [SFTPChannel] { [extensions, transfers].compactMap { $0 } }

    /// The channel for large transfers and ranged reads: through `ssh`
    /// (``SFTPChannel/openThroughSSH(on:)``) where it can be had, opened on first use, else the
    /// second channel. Small requests (listings, batches of small files, renames) stay on the
    /// second channel: a round trip through `ssh` costs more, and its handshake more still (a
    /// folder of 1,000 small files read on access took 1.28 s against 0.66 s through `ssh`).
    func transferChannel() throws(FileProviderError) -> SFTPChannel? {
        if let transfers { return transfers }
        if !transfersThroughSSHFailed {
            if let opened = SFTPChannel.openThroughSSH(on: self) {
                transfers = opened
                return opened
            }
            transfersThroughSSHFailed = true
        }
        return try extensionChannel()
    }

    func extensionChannel() throws(FileProviderError) -> SFTPChannel? {
        if let extensions { return extensions }
        if extensionsFailed { return nil }
        do throws(FileProviderError) {
            extensions = try SFTPChannel.open(on: self)
        } catch {
            if isDead { throw error }
            extensionsFailed = true
        }
        return extensions
    }

    /// Free bytes on the file system holding `path`, where the server tells.
    func freeBytes(_ path: String) -> UInt64? {
        var info = LIBSSH2_SFTP_STATVFS()
        let rc = withPath(path) { pointer, length in libssh2_sftp_statvfs(sftp, pointer, Int(length), &info) }
        if rc != 0 { return nil }
        // The server's numbers: a product past 64 bits is "plenty", never an overflow.
        let (bytes, overflow) = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        return overflow ? .max : bytes
    }

    // MARK: Handles

    /// Opens a file for reading.
    func openForReading(_ path: String) throws(FileProviderError) -> SFTPFile {
        try open(path, flags: UInt(LIBSSH2_FXF_READ), mode: 0, kind: LIBSSH2_SFTP_OPENFILE)
    }

    /// Creates a new file for writing; fails when something is at `path`.
    func createExclusive(_ path: String, mode: Int = 0o644) throws(FileProviderError) -> SFTPFile {
        try open(
            path, flags: UInt(LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL | LIBSSH2_FXF_TRUNC), mode: mode,
            kind: LIBSSH2_SFTP_OPENFILE)
    }

    /// Opens an existing file for writing at any offset, without truncating it.
    func openForWriting(_ path: String) throws(FileProviderError) -> SFTPFile {
        try open(path, flags: UInt(LIBSSH2_FXF_WRITE), mode: 0, kind: LIBSSH2_SFTP_OPENFILE)
    }

    /// Opens a folder for listing.
    func openDirectory(_ path: String) throws(FileProviderError) -> SFTPFile {
        try open(path, flags: 0, mode: 0, kind: LIBSSH2_SFTP_OPENDIR)
    }

    private func open(_ path: String, flags: UInt, mode: Int, kind: Int32) throws(FileProviderError) -> SFTPFile {
        count()
        let handle = withPath(path) { pointer, length in libssh2_sftp_open_ex(sftp, pointer, length, flags, mode, kind) }
        guard let handle else { throw failure(kind == LIBSSH2_SFTP_OPENDIR ? "list" : "open", path: path) }
        return SFTPFile(handle: handle, connection: self, path: path)
    }
}
