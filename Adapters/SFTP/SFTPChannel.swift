import CLibSSH2
import Foundation
import ProviderCore
import Synchronization

// A file of the libssh2 layer (with SSHSession.swift, SFTPConnection.swift and SFTPFile.swift):
// SFTP version 3 spoken directly on a second channel of the session, where libssh2 1.10's SFTP
// API falls short.

/// A second SFTP channel on the same session, spoken to directly, for what libssh2 1.10's SFTP
/// API does not offer: the OpenSSH extensions (`posix-rename@openssh.com`,
/// `limits@openssh.com`), folder listings with several requests in flight, and transfers in
/// large requests (SFTPChannel+Read.swift, SFTPChannel+Write.swift). Knows which extensions
/// the server offers from its VERSION reply. Used by one thread at a time (its connection's).
/// Its bytes go over a channel of the libssh2 session, or, for large transfers, through `ssh`
/// (``openThroughSSH(on:)``, ``SFTPConnection/transferChannel()``).
///
/// Replies are matched to requests by id, so a server may answer in any order. The reply to a
/// request nobody waits for (closing a listed folder) is dropped when it arrives, while a later
/// request waits for its own.
final class SFTPChannel {
    /// Where the channel's bytes go.
    enum Transport {
        /// A channel of the connection's libssh2 session.
        case libssh2(OpaquePointer)
        /// `ssh -s HOST sftp` (``OpenSSHSubsystem``), over a socket pair.
        case openSSH(ProxyConnection)
    }

    private let transport: Transport
    /// Seconds a reply may take (the connection's timeout).
    private let timeout: Int
    /// While the VERSION exchange runs: a failure of `ssh` then leaves the connection usable
    /// (libssh2's channel is opened instead); later it ends the connection.
    private var handshaking = true
    private var extensionNames: Set<String> = []
    private var nextID: UInt32 = 1
    /// Requests whose replies are dropped when they arrive.
    var forgotten: Set<UInt32> = []
    /// What ``transferLimits(on:)`` found: zeros when transfers go through libssh2; `nil`
    /// until asked.
    var knownLimits: (read: Int, write: Int)?
    /// Set when the session died: closing the channel would only wait for the timeout.
    var sessionIsDead = false
    /// Files kept open for ranged reads (SFTPBackend+Partial.swift).
    var readHandles = ReadHandles()

    /// The READDIR requests sent at once at first (OpenSSH answers each with up to 100 names),
    /// doubled for each further batch up to ``maximumReadDirBatch``.
    static let firstReadDirBatch = 4
    static let maximumReadDirBatch = 32

    /// The endpoints where `ssh` failed lately: their new connections use libssh2's channel.
    private static let openSSHRefusals = Mutex(OpenSSHRefusals())

    /// Whether the channel's bytes go through `ssh`.
    var isOpenSSH: Bool {
        if case .openSSH = transport { return true }
        return false
    }

    /// A channel through `ssh` for the connection's large transfers, where ``OpenSSHSubsystem``
    /// says so and `ssh` did not fail for this endpoint lately (``OpenSSHRefusals``); `nil`
    /// otherwise, or when `ssh` fails now (logged; the endpoint's new connections stay on
    /// libssh2's channel for ``OpenSSHRefusals/retryInterval``).
    static func openThroughSSH(on connection: SFTPConnection) -> SFTPChannel? {
        let settings = connection.session.settings
        guard !openSSHRefusals.withLock({ $0.refuses(settings.endpoint, now: DispatchTime.now().uptimeNanoseconds) }),
            let command = OpenSSHSubsystem.command(settings, credential: connection.session.credential, ssh: SSHResolver.findSSH())
        else { return nil }
        do throws(FileProviderError) {
            let proxy = try ProxyConnection(command)
            do throws(FileProviderError) {
                return try SFTPChannel(connection: connection, transport: .openSSH(proxy))
            } catch {
                // The error says how ssh ended and what it printed last.
                proxy.close()
                throw error
            }
        } catch {
            openSSHRefusals.withLock { $0.record(settings.endpoint, now: DispatchTime.now().uptimeNanoseconds) }
            SFTPBackend.logger.notice(
                "\(settings.endpoint): the SFTP channel through ssh failed (\(error.message)); libssh2's channel serves instead (ssh is tried again in \(OpenSSHRefusals.retryInterval / 60_000_000_000) minutes)"
            )
            return nil
        }
    }

    /// Opens a second channel of the connection's libssh2 session, starts the `sftp` subsystem
    /// and reads the server's extensions.
    ///
    /// - Throws: `serverUnreachable` when the channel cannot be opened or the server's VERSION
    ///   reply is malformed; what a failed libssh2 call maps to.
    static func open(on connection: SFTPConnection) throws(FileProviderError) -> SFTPChannel {
        guard let channel = shim_libssh2_channel_open_session(connection.session.raw) else {
            throw connection.failure("open an SFTP channel", path: "")
        }
        if shim_libssh2_channel_subsystem(channel, "sftp") != 0 {
            let failure = connection.failure("start the SFTP subsystem", path: "")
            if !connection.isDead {
                libssh2_channel_close(channel)
                libssh2_channel_free(channel)
            }
            throw failure
        }
        return try SFTPChannel(connection: connection, transport: .libssh2(channel))
    }

    /// Sends INIT over `transport` (its subsystem started) and reads the VERSION reply.
    private init(connection: SFTPConnection, transport: Transport) throws(FileProviderError) {
        self.transport = transport
        timeout = connection.session.settings.timeout
        do throws(FileProviderError) {
            // SSH_FXP_INIT, version 3, has no request id.
            try send([0, 0, 0, 5, Packet.initialize, 0, 0, 0, 3], on: connection)
            var reply = try SFTPReader(receive(on: connection))
            guard try reply.byte() == Packet.version else {
                throw FileProviderError(.serverUnreachable, "the server's SFTP VERSION reply is malformed")
            }
            _ = try reply.u32()
            while !reply.isAtEnd {
                let name = try reply.string()
                _ = try reply.string()
                extensionNames.insert(String(decoding: name, as: UTF8.self))
            }
        } catch {
            sessionIsDead = connection.isDead
            throw error
        }
        handshaking = false
    }

    deinit {
        switch transport {
        case .libssh2(let channel):
            if !sessionIsDead {
                libssh2_channel_close(channel)
                libssh2_channel_free(channel)
            }
        case .openSSH(let proxy):
            proxy.close()
        }
    }

    func offers(_ name: String) -> Bool { extensionNames.contains(name) }

    /// SFTP version 3 packet types.
    enum Packet {
        static let initialize: UInt8 = 1
        static let version: UInt8 = 2
        static let open: UInt8 = 3
        static let close: UInt8 = 4
        static let read: UInt8 = 5
        static let write: UInt8 = 6
        static let linkStatus: UInt8 = 7
        static let fileStatus: UInt8 = 8
        static let setFileStatus: UInt8 = 10
        static let openDirectory: UInt8 = 11
        static let readDirectory: UInt8 = 12
        static let realPath: UInt8 = 16
        static let status: UInt8 = 101
        static let handle: UInt8 = 102
        static let data: UInt8 = 103
        static let name: UInt8 = 104
        static let attributes: UInt8 = 105
        static let extended: UInt8 = 200
        static let extendedReply: UInt8 = 201
    }

    /// SSH_FX_EOF.
    static let endOfFile: UInt32 = 1

    // MARK: Requests

    /// Sends a request whose arguments are strings (SSH_FXP_SYMLINK = 20, SSH_FXP_EXTENDED = 200
    /// with the extension's name first) and returns the status code of the reply.
    ///
    /// - Throws: `serverUnreachable` when the connection breaks or the reply is not a status.
    func request(packetType: UInt8, _ arguments: [[UInt8]], on connection: SFTPConnection) throws(FileProviderError)
        -> UInt32
    {
        var packets = PacketWriter()
        let id = packets.append(packetType, id: takeID(), arguments)
        try send(packets.bytes, on: connection)
        var reply = try replies(to: [id], on: connection)[0]
        guard reply.type == Packet.status else {
            throw FileProviderError(.serverUnreachable, "unexpected reply to SFTP request \(packetType)")
        }
        return try reply.reader.u32()
    }

    /// A folder opened by ``openFolder(_:resolving:on:)``: its resolved path (when asked for)
    /// and its handle, each an outcome of its own.
    struct OpenedFolder {
        var resolved: Result<[UInt8], FileProviderError>?
        var handle: Result<[UInt8], FileProviderError>
    }

    /// Opens a folder for listing and, with `resolving`, asks for its real path in the same
    /// round trip (REALPATH and OPENDIR sent together).
    ///
    /// The caller checks the resolved path before it reads, and closes the handle with
    /// ``closeWithoutWaiting(_:on:)`` in any case.
    /// - Throws: `serverUnreachable` when the connection breaks or a reply is malformed. What
    ///   the server refused is in the result, as the error of its SFTP status naming `path`.
    func openFolder(_ path: String, resolving: Bool, on connection: SFTPConnection) throws(FileProviderError)
        -> OpenedFolder
    {
        let bytes = Array(path.utf8)
        var packets = PacketWriter()
        let resolveID = resolving ? packets.append(Packet.realPath, id: takeID(), [bytes]) : nil
        let openID = packets.append(Packet.openDirectory, id: takeID(), [bytes])
        try send(packets.bytes, on: connection)
        var answers = try replies(to: resolveID.map { [$0, openID] } ?? [openID], on: connection)
        var opened = OpenedFolder(handle: try answers[answers.count - 1].string(expecting: Packet.handle, "list", path))
        if resolveID != nil {
            opened.resolved = try answers[0].firstName("resolve", path)
        }
        return opened
    }

    /// Every entry of an open folder, as raw name bytes and attributes, in the server's order.
    ///
    /// READDIR requests go several at once (OpenSSH answers each with up to 100 names): two
    /// round trips for a folder of up to 400 entries with ``openFolder(_:resolving:on:)``.
    /// - Throws: the error of the SFTP status the server answered with, naming `path`;
    ///   `serverUnreachable` when the connection breaks or a reply is malformed.
    func readFolder(_ handle: [UInt8], path: String, on connection: SFTPConnection) throws(FileProviderError)
        -> [(name: [UInt8], attributes: RemoteAttributes)]
    {
        var entries: [(name: [UInt8], attributes: RemoteAttributes)] = []
        var batch = Self.firstReadDirBatch
        while true {
            var packets = PacketWriter()
            var ids: [UInt32] = []
            for _ in 0..<batch { ids.append(packets.append(Packet.readDirectory, id: takeID(), [handle])) }
            try send(packets.bytes, on: connection)
            var ended = false
            // All replies are read, even after the end: none may be left for a later request.
            for var reply in try replies(to: ids, on: connection) {
                if reply.type == Packet.status {
                    let code = try reply.reader.u32()
                    if code != Self.endOfFile { throw SFTPStatus.error(UInt(code), operation: "list", path: path) }
                    ended = true
                    continue
                }
                guard reply.type == Packet.name else { throw Reply.unexpected(reply.type, "list", path) }
                try reply.appendNames(to: &entries)
                if entries.count > ItemBounds.maximumEntriesPerFolder { throw ItemBounds.tooManyEntries(in: path) }
            }
            if ended { return entries }
            batch = min(batch * 2, Self.maximumReadDirBatch)
        }
    }

    /// Sends CLOSE for a handle and does not wait: its reply is dropped when it arrives.
    func closeWithoutWaiting(_ handle: [UInt8], on connection: SFTPConnection) {
        var packets = PacketWriter()
        let id = packets.append(Packet.close, id: takeID(), [handle])
        if (try? send(packets.bytes, on: connection)) != nil { forgotten.insert(id) }
    }

    // MARK: Packets

    func takeID() -> UInt32 {
        defer { nextID &+= 1 }
        return nextID
    }

    /// The replies to `ids`, in the order of `ids`, whatever order they arrive in; replies to
    /// forgotten requests are dropped on the way.
    func replies(to ids: [UInt32], on connection: SFTPConnection) throws(FileProviderError) -> [Reply] {
        var found: [UInt32: Reply] = [:]
        while found.count < ids.count {
            var reader = try SFTPReader(receive(on: connection))
            let type = try reader.byte()
            let id = try reader.u32()
            if forgotten.remove(id) != nil { continue }
            guard ids.contains(id), found[id] == nil else {
                throw FileProviderError(.serverUnreachable, "the server answered an SFTP request that was not made (id \(id))")
            }
            found[id] = Reply(type: type, reader: reader)
        }
        return ids.map { found[$0]! }
    }

    func send(_ packet: [UInt8], on connection: SFTPConnection) throws(FileProviderError) {
        let failure = packet.withUnsafeBytes { bytes -> FileProviderError? in
            do throws(FileProviderError) {
                try send(bytes, on: connection)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Sends whole packets from `bytes`.
    ///
    /// - Throws: `serverUnreachable` (or what the failed libssh2 call maps to) when the channel
    ///   breaks.
    func send(_ bytes: UnsafeRawBufferPointer, on connection: SFTPConnection) throws(FileProviderError) {
        connection.count()
        var done = 0
        while done < bytes.count {
            let start = bytes.baseAddress!.advanced(by: done)
            switch transport {
            case .libssh2(let channel):
                let count = shim_libssh2_channel_write(channel, start.assumingMemoryBound(to: CChar.self), bytes.count - done)
                if count < 0 { throw connection.failure("send an SFTP request", path: "") }
                done += count
            case .openSSH(let proxy):
                let count = Glibc.send(proxy.socket, start, bytes.count - done, Int32(MSG_NOSIGNAL))
                if count < 0 && errno == EINTR { continue }
                if count < 0 { throw broken(proxy, "send an SFTP request (\(String(cString: strerror(errno))))", connection) }
                done += count
            }
        }
    }

    /// The next packet's body (its type first).
    ///
    /// - Throws: `serverUnreachable` when the channel breaks or closes, or the packet's length
    ///   is 0 or over 1 MiB (OpenSSH sends at most 256 KiB).
    func receive(on connection: SFTPConnection) throws(FileProviderError) -> [UInt8] {
        let stream = Stream(channel: self, connection: connection)
        var header = SFTPReader(try stream.receive(4))
        let length = Int(try header.u32())
        guard length > 0, length < 1 << 20 else {
            throw FileProviderError(.serverUnreachable, "an SFTP reply of \(length) bytes")
        }
        return try stream.receive(length)
    }

    /// Fills `buffer` with the channel's next bytes.
    ///
    /// - Throws: `serverUnreachable` when the channel breaks or closes first.
    func readExactly(into buffer: UnsafeMutableRawBufferPointer, on connection: SFTPConnection)
        throws(FileProviderError)
    {
        var done = 0
        while done < buffer.count {
            let start = buffer.baseAddress!.advanced(by: done)
            switch transport {
            case .libssh2(let channel):
                let got = shim_libssh2_channel_read(channel, start.assumingMemoryBound(to: CChar.self), buffer.count - done)
                if got < 0 { throw connection.failure("read an SFTP reply", path: "") }
                if got == 0 { throw FileProviderError(.serverUnreachable, "the SFTP channel closed") }
                done += got
            case .openSSH(let proxy):
                var poller = pollfd(fd: proxy.socket, events: Int16(POLLIN), revents: 0)
                let ready = poll(&poller, 1, Int32(clamping: timeout * 1000))
                if ready < 0 && errno == EINTR { continue }
                if ready == 0 { throw broken(proxy, "read an SFTP reply (none for \(timeout) s)", connection) }
                let got = Glibc.recv(proxy.socket, start, buffer.count - done, 0)
                if got < 0 && errno == EINTR { continue }
                if got < 0 { throw broken(proxy, "read an SFTP reply (\(String(cString: strerror(errno))))", connection) }
                if got == 0 { throw broken(proxy, "read an SFTP reply (the channel closed)", connection) }
                done += got
            }
        }
    }

    /// The error for `ssh` failing during `what`: once the channel is up, the connection is
    /// given up with it (the pool opens a new one).
    private func broken(_ proxy: ProxyConnection, _ what: String, _ connection: SFTPConnection) -> FileProviderError {
        if !handshaking { connection.abandon() }
        return FileProviderError(
            .serverUnreachable, "\(what) on \(connection.session.settings.endpoint): \(proxy.diagnosis(waiting: handshaking ? 1 : 0))")
    }
}

/// Requests written one after the other into one buffer, sent with one channel write.
struct PacketWriter {
    private(set) var bytes: [UInt8] = []

    /// Appends a request whose arguments are strings and returns its id.
    /// `trailing` (fixed-size fields) goes after the strings; `dataLength` bytes the caller
    /// sends right after these (a write's data) count in the packet's length.
    @discardableResult
    mutating func append(
        _ type: UInt8, id: UInt32, _ arguments: [[UInt8]], trailing: [UInt8] = [], dataLength: Int = 0
    ) -> UInt32 {
        let length = 5 + arguments.reduce(0) { $0 + 4 + $1.count } + trailing.count + dataLength
        appendU32(UInt32(length))
        bytes.append(type)
        appendU32(id)
        for argument in arguments {
            appendU32(UInt32(argument.count))
            bytes += argument
        }
        bytes += trailing
        return id
    }

    mutating func appendU32(_ value: UInt32) { bytes += Self.u32(value) }

    /// `value` in network byte order.
    static func u32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    /// `value` in network byte order.
    static func u64(_ value: UInt64) -> [UInt8] { u32(UInt32(value >> 32)) + u32(UInt32(value & 0xffff_ffff)) }
}

/// One reply: its type and the bytes after its id.
struct Reply {
    var type: UInt8
    var reader: SFTPReader

    static func unexpected(_ type: UInt8, _ operation: String, _ path: String) -> FileProviderError {
        FileProviderError(.serverUnreachable, "\(operation) \(path): the server sent an unexpected SFTP reply (type \(type))")
    }

    /// The string of a reply of type `expected` (a handle), or the error of its status.
    mutating func string(expecting expected: UInt8, _ operation: String, _ path: String) throws(FileProviderError)
        -> Result<[UInt8], FileProviderError>
    {
        switch type {
        case expected: return .success(try reader.string())
        case SFTPChannel.Packet.status:
            return .failure(SFTPStatus.error(UInt(try reader.u32()), operation: operation, path: path))
        default: throw Self.unexpected(type, operation, path)
        }
    }

    /// The first name of a NAME reply (what REALPATH answers), or the error of its status.
    mutating func firstName(_ operation: String, _ path: String) throws(FileProviderError)
        -> Result<[UInt8], FileProviderError>
    {
        switch type {
        case SFTPChannel.Packet.name:
            guard try reader.u32() >= 1 else { throw Self.unexpected(type, operation, path) }
            return .success(try reader.string())
        case SFTPChannel.Packet.status:
            return .failure(SFTPStatus.error(UInt(try reader.u32()), operation: operation, path: path))
        default: throw Self.unexpected(type, operation, path)
        }
    }

    /// Appends the names and attributes of a NAME reply (the long names are skipped).
    mutating func appendNames(to entries: inout [(name: [UInt8], attributes: RemoteAttributes)])
        throws(FileProviderError)
    {
        let count = try reader.u32()
        // Each name takes at least 12 bytes: a bound on what a hostile count may reserve. The
        // room grows by doubling: reserving just enough for each reply would copy the whole
        // listing again for every reply of a large folder.
        let needed = entries.count + min(Int(count), reader.remaining / 12)
        if needed > entries.capacity { entries.reserveCapacity(max(needed, entries.capacity * 2)) }
        for _ in 0..<count {
            let name = try reader.string()
            try reader.skipString()
            entries.append((name, try reader.attributes()))
        }
    }
}

/// Reads the fields of an SFTP packet, never past its end.
struct SFTPReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { index >= bytes.count }
    var remaining: Int { bytes.count - index }

    private static let truncated = FileProviderError(.serverUnreachable, "the server sent a truncated SFTP reply")

    mutating func byte() throws(FileProviderError) -> UInt8 {
        guard index < bytes.count else { throw Self.truncated }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func u32() throws(FileProviderError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw Self.truncated }
        defer { index += 4 }
        return UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8
            | UInt32(bytes[index + 3])
    }

    mutating func u64() throws(FileProviderError) -> UInt64 {
        let high = try u32()
        return UInt64(high) << 32 | UInt64(try u32())
    }

    mutating func string() throws(FileProviderError) -> [UInt8] {
        let length = Int(try u32())
        guard bytes.count - index >= length else { throw Self.truncated }
        defer { index += length }
        return Array(bytes[index..<(index + length)])
    }

    mutating func skipString() throws(FileProviderError) {
        let length = Int(try u32())
        guard bytes.count - index >= length else { throw Self.truncated }
        index += length
    }

    /// SFTP version 3 ATTRS: flags, then size, owner, permissions and times where flagged, then
    /// extended pairs (skipped).
    mutating func attributes() throws(FileProviderError) -> RemoteAttributes {
        let flags = try u32()
        var attributes = RemoteAttributes()
        // Numbers from the server are checked here, where they enter: an impossible one is
        // noted in `problem` and never becomes an item (see ItemBounds).
        if flags & UInt32(LIBSSH2_SFTP_ATTR_SIZE) != 0 { attributes.setSize(try u64()) }
        if flags & UInt32(LIBSSH2_SFTP_ATTR_UIDGID) != 0 {
            attributes.uid = try u32()
            attributes.gid = try u32()
        }
        if flags & UInt32(LIBSSH2_SFTP_ATTR_PERMISSIONS) != 0 { attributes.permissions = try u32() }
        if flags & UInt32(LIBSSH2_SFTP_ATTR_ACMODTIME) != 0 {
            let access = try u32()
            attributes.setTimes(modification: UInt64(try u32()), access: UInt64(access))
        }
        if flags & UInt32(LIBSSH2_SFTP_ATTR_EXTENDED) != 0 {
            for _ in 0..<(try u32()) {
                try skipString()
                try skipString()
            }
        }
        return attributes
    }
}
