import CLibSSH2
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

// The SFTP half of the libssh2 layer (see SSHSession.swift): every libssh2_sftp_* call, and
// the mapping of SFTP status codes to FileProviderError. SFTPChannel.swift speaks SFTP itself
// on a second channel where libssh2's SFTP API falls short.

/// The attributes of a remote file, as SFTP version 3 gives them (whole seconds, no inode).
struct RemoteAttributes: Sendable, Hashable {
    var size: Int64
    var permissions: UInt32
    var uid: UInt32
    var gid: UInt32
    /// Modification time in seconds since 1970.
    var modificationTime: Int64
    var accessTime: Int64
    /// A size the server sent that no file can have (over ``ItemBounds/maximumSize``, such as
    /// 2^64−1), or `nil`; ``size`` is 0 then.
    var sizeProblem: String?
    /// A modification time the server sent outside ``ItemBounds``, or `nil`;
    /// ``modificationTime`` is 0 then.
    var dateProblem: String?

    /// Why these attributes cannot describe an item of `kind`, or `nil` (a folder's size is not
    /// looked at). Such attributes never become an item.
    func problem(for kind: ItemKind) -> String? {
        kind == .folder ? dateProblem : sizeProblem ?? dateProblem
    }

    init(
        size: Int64 = 0, permissions: UInt32 = 0, uid: UInt32 = 0, gid: UInt32 = 0, modificationTime: Int64 = 0,
        accessTime: Int64 = 0
    ) {
        self.size = size
        self.permissions = permissions
        self.uid = uid
        self.gid = gid
        self.modificationTime = modificationTime
        self.accessTime = accessTime
    }

    init(_ raw: LIBSSH2_SFTP_ATTRIBUTES) {
        let flags = raw.flags
        let hasOwner = flags & UInt(LIBSSH2_SFTP_ATTR_UIDGID) != 0
        self.init(
            permissions: flags & UInt(LIBSSH2_SFTP_ATTR_PERMISSIONS) != 0 ? UInt32(truncatingIfNeeded: raw.permissions) : 0,
            uid: hasOwner ? UInt32(truncatingIfNeeded: raw.uid) : 0, gid: hasOwner ? UInt32(truncatingIfNeeded: raw.gid) : 0)
        if flags & UInt(LIBSSH2_SFTP_ATTR_SIZE) != 0 { setSize(UInt64(raw.filesize)) }
        if flags & UInt(LIBSSH2_SFTP_ATTR_ACMODTIME) != 0 {
            setTimes(modification: UInt64(raw.mtime), access: UInt64(raw.atime))
        }
    }

    /// Takes a size from the wire (an unsigned 64-bit number): one over
    /// ``ItemBounds/maximumSize`` is kept out of ``size`` (which stays 0) and noted in
    /// ``sizeProblem``.
    mutating func setSize(_ wire: UInt64) {
        if let problem = ItemBounds.problem(withSize: wire) {
            sizeProblem = problem
            size = 0
        } else {
            size = Int64(wire)
        }
    }

    /// Takes the times from the wire (seconds since 1970; 32 bits in SFTP version 3, wider
    /// through libssh2's structure): a modification time outside ``ItemBounds`` is noted in
    /// ``dateProblem``; an access time that does not fit is kept as 0 (it is never shown).
    mutating func setTimes(modification: UInt64, access: UInt64) {
        if let problem = ItemBounds.problem(withSeconds: modification, "modification date") {
            dateProblem = problem
            modificationTime = 0
        } else {
            modificationTime = Int64(modification)
        }
        accessTime = Int64(exactly: access) ?? 0
    }

    /// The kind of item, or `nil` for sockets, FIFOs and devices.
    var kind: ItemKind? {
        switch permissions & UInt32(LIBSSH2_SFTP_S_IFMT) {
        case UInt32(LIBSSH2_SFTP_S_IFREG): return .file
        case UInt32(LIBSSH2_SFTP_S_IFDIR): return .folder
        case UInt32(LIBSSH2_SFTP_S_IFLNK): return .symlink
        default: return nil
        }
    }
}

/// Maps SFTP status codes to errors; separate so it can be tested without a server.
enum SFTPStatus {
    /// The error for an SFTP status code after `operation` on `path`.
    static func error(_ status: UInt, operation: String, path: String) -> FileProviderError {
        let text = "\(operation) \(path)"
        switch status {
        case UInt(LIBSSH2_FX_NO_SUCH_FILE), UInt(LIBSSH2_FX_NO_SUCH_PATH):
            return FileProviderError(.noSuchItem, "\(text): no such file")
        case UInt(LIBSSH2_FX_PERMISSION_DENIED), UInt(LIBSSH2_FX_WRITE_PROTECT):
            return FileProviderError(.permissionDenied, "\(text): permission denied by the server")
        case UInt(LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM), UInt(LIBSSH2_FX_QUOTA_EXCEEDED):
            return FileProviderError(.insufficientQuota, "\(text): the server is out of space")
        case UInt(LIBSSH2_FX_FILE_ALREADY_EXISTS):
            return FileProviderError(.filenameCollision, "\(text): it already exists")
        case UInt(LIBSSH2_FX_DIR_NOT_EMPTY):
            return FileProviderError(.directoryNotEmpty, "\(text): the folder is not empty")
        case UInt(LIBSSH2_FX_NOT_A_DIRECTORY):
            return FileProviderError(.noSuchItem, "\(text): a component is not a folder")
        case UInt(LIBSSH2_FX_INVALID_FILENAME):
            return FileProviderError(.invalidFilename, "\(text): the server refused the name")
        case UInt(LIBSSH2_FX_OP_UNSUPPORTED):
            return FileProviderError(.notSupported, "\(text): the server does not support this")
        case UInt(LIBSSH2_FX_NO_CONNECTION), UInt(LIBSSH2_FX_CONNECTION_LOST):
            return FileProviderError(.serverUnreachable, "\(text): the connection was lost")
        case UInt(LIBSSH2_FX_BAD_MESSAGE):
            return FileProviderError(.invalidArgument, "\(text): the server rejected the request")
        default:
            return FileProviderError(
                .cannotSynchronize, "\(text): the server reported a failure (SFTP status \(status))")
        }
    }
}

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
        } catch where error.code == .noSuchItem {
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

    func extensionChannel() throws(FileProviderError) -> SFTPChannel? {
        if let extensions { return extensions }
        if extensionsFailed { return nil }
        do throws(FileProviderError) {
            extensions = try SFTPChannel(connection: self)
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

/// An open remote file or folder, closed in `deinit` (or earlier with ``close()``).
final class SFTPFile {
    private var handle: OpaquePointer?
    private let connection: SFTPConnection
    let path: String

    fileprivate init(handle: OpaquePointer, connection: SFTPConnection, path: String) {
        self.handle = handle
        self.connection = connection
        self.path = path
    }

    deinit {
        if let handle, !connection.isDead { libssh2_sftp_close_handle(handle) }
    }

    /// Closes the handle, reporting errors (a server may report a failed write only here).
    func close() throws(FileProviderError) {
        guard let handle else { return }
        self.handle = nil
        connection.count()
        if libssh2_sftp_close_handle(handle) != 0 { throw connection.failure("close", path: path) }
    }

    /// The attributes of the open file.
    func attributes() throws(FileProviderError) -> RemoteAttributes {
        connection.count()
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        if libssh2_sftp_fstat_ex(handle, &attributes, 0) != 0 { throw connection.failure("stat", path: path) }
        return RemoteAttributes(attributes)
    }

    /// Sets the access and modification times of the open file.
    func setTimes(modification: Int64, access: Int64) throws(FileProviderError) {
        connection.count()
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        attributes.flags = UInt(LIBSSH2_SFTP_ATTR_ACMODTIME)
        attributes.mtime = UInt(truncatingIfNeeded: modification)
        attributes.atime = UInt(truncatingIfNeeded: access)
        if libssh2_sftp_fstat_ex(handle, &attributes, 1) != 0 { throw connection.failure("set the dates of", path: path) }
    }

    /// Moves the read position.
    func seek(to offset: Int64) { libssh2_sftp_seek64(handle, UInt64(offset)) }

    /// Reads up to `buffer.count` bytes; 0 at the end of the file. libssh2 keeps several read
    /// requests in flight for a large buffer.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(FileProviderError) -> Int {
        connection.count()
        let count = libssh2_sftp_read(handle, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), buffer.count)
        if count < 0 { throw connection.failure("read", path: path) }
        return count
    }

    /// Writes `count` bytes at `offset`, which `fill` copies into the part of `buffer` it is
    /// given (all of it, from the file offset it is given), keeping requests in flight all along.
    ///
    /// libssh2 returns from a write once the server acknowledged part of it, and the bytes not
    /// acknowledged yet must start the next call's buffer (it sends only what is new). So the
    /// buffer slides: acknowledged bytes are dropped, new ones appended, and the requests in
    /// flight never drain before the end. (Whole 2 MiB writes, each waiting for its last
    /// acknowledgment, left the server idle while we encrypted the next one and us idle while
    /// it caught up.)
    func write(
        count: Int64, at offset: Int64, through buffer: UnsafeMutableRawBufferPointer,
        fill: (UnsafeMutableRawBufferPointer, Int64) throws(FileProviderError) -> Void
    ) throws(FileProviderError) {
        seek(to: offset)
        let base = buffer.baseAddress!
        var unacknowledged = 0  // buffer[unacknowledged..<filled] is not acknowledged yet
        var filled = 0
        var copied: Int64 = 0
        var acknowledged: Int64 = 0
        while acknowledged < count {
            if unacknowledged >= buffer.count / 2 {
                memmove(base, base + unacknowledged, filled - unacknowledged)
                filled -= unacknowledged
                unacknowledged = 0
            }
            if filled < buffer.count && copied < count {
                let more = Int(min(Int64(buffer.count - filled), count - copied))
                try fill(UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<(filled + more)]), offset + copied)
                filled += more
                copied += Int64(more)
            }
            connection.count()
            let sent = libssh2_sftp_write(
                handle, (base + unacknowledged).assumingMemoryBound(to: CChar.self), filled - unacknowledged)
            if sent < 0 { throw connection.failure("write", path: path) }
            unacknowledged += sent
            acknowledged += Int64(sent)
        }
    }

    /// The next entry of a folder as raw name bytes and attributes; `nil` at the end.
    func nextEntry() throws(FileProviderError) -> (name: [UInt8], attributes: RemoteAttributes)? {
        connection.count()
        var buffer = [CChar](repeating: 0, count: 4096)
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        let length = libssh2_sftp_readdir_ex(handle, &buffer, buffer.count, nil, 0, &attributes)
        if length < 0 { throw connection.failure("list", path: path) }
        if length == 0 { return nil }
        return (buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, RemoteAttributes(attributes))
    }
}

/// A local file the adapter reads uploads from or writes downloads to, closed in `deinit`.
///
/// The positioned reads and writes (`pread`/`pwrite`) may be used by several threads at once.
final class LocalFile: @unchecked Sendable {
    let fd: Int32
    let path: String
    /// Where the bytes written, and those read at an offset, also go (the engine's
    /// ``ContentSink``); set before the file is shared between threads.
    var sink: ContentSink?

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { Glibc.close(fd) }

    /// Opens a file for reading.
    /// - Throws: `localIOFailure` naming the path.
    static func openForReading(_ path: String) throws(FileProviderError) -> LocalFile {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if fd == -1 { throw localError("open", path) }
        return LocalFile(fd: fd, path: path)
    }

    /// Opens the engine's destination file for writing, truncated to `offset` bytes and
    /// positioned there.
    ///
    /// A file that already has that size is not truncated: on ext4 a truncation to 0 makes the
    /// last `close` start writing back the whole file (the `auto_da_alloc` heuristic), which
    /// cost a quarter of a second per GiB in the download's own thread.
    /// - Throws: `localIOFailure` naming the path.
    static func openDestination(_ path: String, keeping offset: Int64) throws(FileProviderError) -> LocalFile {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        if fd == -1 { throw localError("open", path) }
        let file = LocalFile(fd: fd, path: path)
        if try file.size() != offset, ftruncate(fd, off_t(offset)) == -1 { throw localError("truncate", path) }
        if lseek(fd, off_t(offset), SEEK_SET) == -1 { throw localError("seek in", path) }
        return file
    }

    /// Opens the engine's existing file for positioned writes, neither creating nor truncating
    /// it (ranged reads write into it at their offsets); every piece written also goes to
    /// `sink`, if given.
    /// - Throws: `localIOFailure` naming the path.
    static func openForWritingInPlace(_ path: String, sink: ContentSink? = nil) throws(FileProviderError) -> LocalFile {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        if fd == -1 { throw localError("open", path) }
        let file = LocalFile(fd: fd, path: path)
        file.sink = sink
        return file
    }

    /// The size of the open file.
    func size() throws(FileProviderError) -> Int64 {
        var info = stat()
        if fstat(fd, &info) == -1 { throw Self.localError("stat", path) }
        return Int64(info.st_size)
    }

    /// Reads until `buffer` is full or the file ends, at `offset` (`pread`) or else from the
    /// current position; returns the bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64? = nil) throws(FileProviderError) -> Int {
        var total = 0
        while total < buffer.count {
            let start = buffer.baseAddress!.advanced(by: total)
            let left = buffer.count - total
            let count = offset.map { pread(fd, start, left, off_t($0) + off_t(total)) } ?? Glibc.read(fd, start, left)
            if count == -1 {
                if errno == EINTR { continue }
                throw Self.localError("read", path)
            }
            if count == 0 { break }
            total += count
        }
        if let sink, let offset, total > 0 { sink.consume(UnsafeRawBufferPointer(rebasing: buffer[0..<total]), at: offset) }
        return total
    }

    /// Writes all of `buffer` at `offset`.
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(FileProviderError) {
        var done = 0
        while done < buffer.count {
            let count = pwrite(fd, buffer.baseAddress!.advanced(by: done), buffer.count - done, off_t(offset) + off_t(done))
            if count == -1 {
                if errno == EINTR { continue }
                throw Self.localError("write", path)
            }
            done += count
        }
        sink?.consume(buffer, at: offset)
    }

    /// Cuts the file to `size` bytes.
    func truncate(to size: Int64) throws(FileProviderError) {
        if ftruncate(fd, off_t(size)) == -1 { throw Self.localError("truncate", path) }
    }

    // MARK: The prefix a ranged download recorded

    /// The extended attribute in which a download that writes ranges out of order records the
    /// prefix it has written without a gap, while it runs.
    static let prefixAttribute = "user.fileprovider.verified-prefix"

    /// The prefix a ranged download recorded on the file at `path`, if one did (bytes past it
    /// may have gaps: such a download was killed).
    static func recordedPrefix(atPath path: String) -> Int64? {
        var buffer = [UInt8](repeating: 0, count: 24)
        let count = getxattr(path, prefixAttribute, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return Int64(String(decoding: buffer.prefix(count), as: UTF8.self))
    }

    /// Records `prefix` on the file; `false` when the file system keeps no extended attributes.
    func recordPrefix(_ prefix: Int64) -> Bool {
        let value = Array(String(prefix).utf8)
        return fsetxattr(fd, Self.prefixAttribute, value, value.count, 0) == 0
    }

    /// Removes the recorded prefix (nothing happens when there is none).
    func forgetPrefix() { _ = fremovexattr(fd, Self.prefixAttribute) }

    /// Local failures are `localIOFailure` whatever the errno, the store is not at fault; but
    /// a full local disk is `fileWriteOutOfSpace`, so the engine can give space back.
    private static func localError(_ operation: String, _ path: String) -> FileProviderError {
        POSIXError.localWriteError(operation, path: path)
    }
}
