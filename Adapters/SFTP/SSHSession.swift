import CLibSSH2
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

// Every libssh2 call of the adapter is in this file and in SFTPHandle.swift: the rest of the
// adapter never sees a C pointer or a raw return code.

/// Where and how to connect: the options of a domain after the ssh config file was applied.
struct ConnectionSettings: Sendable, Hashable {
    /// The host name or address to connect to (a config alias already replaced by its HostName).
    var host: String
    var port: Int
    var user: String
    /// Private key files to try, in order.
    var identityFiles: [String]
    /// The name of the environment variable holding the key passphrase.
    var passphraseEnvironment: String?
    /// The name of the environment variable holding the password.
    var passwordEnvironment: String?
    var useAgent: Bool
    var knownHostsPath: String
    var acceptNewHostKey: Bool
    /// Seconds a connection attempt or a blocking call may take.
    var timeout: Int
    /// The root folder on the server, as given (`.` is the login folder).
    var rootPath: String

    /// Whether the server runs on this machine (a loopback address), sharing our processors.
    var isLocal: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }

    /// `host:port` for messages.
    var endpoint: String { port == 22 ? host : "\(host):\(port)" }

    /// The host's name in known_hosts, as OpenSSH writes it.
    var knownHostsName: String { port == 22 ? host : "[\(host)]:\(port)" }
}

/// Runs `libssh2_init` once per process.
enum LibSSH2 {
    static let initialized: Bool = libssh2_init(0) == 0
}

/// A connected, authenticated SSH session, freed (and its socket closed) in `deinit`.
///
/// Used by one thread at a time: a connection of the pool lives on its own thread.
final class SSHSession: @unchecked Sendable {
    let settings: ConnectionSettings
    let raw: OpaquePointer
    private let socket: Int32
    /// The server's version banner (`SSH-2.0-OpenSSH_9.6…`).
    let banner: String

    /// Connects, checks the host key against known_hosts and authenticates.
    ///
    /// - Throws: `serverUnreachable` when the host cannot be resolved or reached, refuses the
    ///   connection or times out; `notAuthenticated` when the host key is unknown (without
    ///   accept-new) or changed, naming the known_hosts file and the key's SHA256 fingerprint,
    ///   or when every credential was refused; `invalidArgument` when a key file is missing.
    init(settings: ConnectionSettings) throws(FileProviderError) {
        guard LibSSH2.initialized else {
            throw FileProviderError(.serverUnreachable, "libssh2 could not be initialized")
        }
        self.settings = settings
        let socket = try Self.connectSocket(settings)
        guard let raw = shim_libssh2_session_init() else {
            Glibc.close(socket)
            throw FileProviderError(.serverUnreachable, "libssh2 could not make a session")
        }
        libssh2_session_set_blocking(raw, 1)
        libssh2_session_set_timeout(raw, settings.timeout * 1000)
        let rc = libssh2_session_handshake(raw, libssh2_socket_t(socket))
        if rc != 0 {
            let error = Self.transportError(raw, rc, "SSH handshake with \(settings.endpoint)")
            libssh2_session_free(raw)
            Glibc.close(socket)
            throw error
        }
        self.raw = raw
        self.socket = socket
        banner = libssh2_session_banner_get(raw).map { String(cString: $0) } ?? ""
        // From here on deinit frees the session and closes the socket.
        try HostKeyCheck(session: raw, settings: settings).verify()
        try authenticate()
        libssh2_keepalive_config(raw, 1, 30)
    }

    deinit {
        _ = shim_libssh2_session_disconnect(raw, "bye")
        libssh2_session_free(raw)
        Glibc.close(socket)
    }

    /// The last libssh2 error code of the session.
    var lastErrorCode: Int32 { libssh2_session_last_errno(raw) }

    /// The last libssh2 error message of the session.
    var lastErrorMessage: String { Self.lastMessage(raw) }

    static func lastMessage(_ raw: OpaquePointer) -> String {
        var message: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        _ = libssh2_session_last_error(raw, &message, &length, 0)
        guard let message, length > 0 else { return "unknown error" }
        return String(decoding: UnsafeRawBufferPointer(start: message, count: Int(length)), as: UTF8.self)
    }

    /// Whether a libssh2 error code means the connection is gone (or never worked).
    static func isTransportError(_ code: Int32) -> Bool {
        switch code {
        case LIBSSH2_ERROR_SOCKET_NONE, LIBSSH2_ERROR_BANNER_RECV, LIBSSH2_ERROR_BANNER_SEND,
            LIBSSH2_ERROR_KEX_FAILURE, LIBSSH2_ERROR_SOCKET_SEND, LIBSSH2_ERROR_TIMEOUT,
            LIBSSH2_ERROR_SOCKET_DISCONNECT, LIBSSH2_ERROR_CHANNEL_CLOSED, LIBSSH2_ERROR_CHANNEL_EOF_SENT,
            LIBSSH2_ERROR_SOCKET_TIMEOUT, LIBSSH2_ERROR_SOCKET_RECV, LIBSSH2_ERROR_CHANNEL_FAILURE,
            LIBSSH2_ERROR_CHANNEL_UNKNOWN, LIBSSH2_ERROR_EAGAIN:
            return true
        default:
            return false
        }
    }

    /// The error for a failed session-level call.
    static func transportError(_ raw: OpaquePointer, _ code: Int32, _ operation: String) -> FileProviderError {
        let message = lastMessage(raw)
        switch code {
        case LIBSSH2_ERROR_AUTHENTICATION_FAILED, LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED, LIBSSH2_ERROR_PASSWORD_EXPIRED:
            return FileProviderError(.notAuthenticated, "\(operation): \(message)")
        case LIBSSH2_ERROR_TIMEOUT, LIBSSH2_ERROR_SOCKET_TIMEOUT:
            return FileProviderError(.serverUnreachable, "\(operation): timed out (\(message))")
        default:
            return FileProviderError(.serverUnreachable, "\(operation): \(message) (libssh2 error \(code))")
        }
    }

    // MARK: Socket

    /// Resolves the host and connects a TCP socket within the timeout.
    private static func connectSocket(_ settings: ConnectionSettings) throws(FileProviderError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(settings.host, String(settings.port), &hints, &list)
        if status != 0 {
            let reason = String(cString: gai_strerror(status))
            throw FileProviderError(.serverUnreachable, "cannot resolve \(settings.host): \(reason)")
        }
        defer { freeaddrinfo(list) }
        var lastReason = "no address"
        var entry = list
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = Glibc.socket(
                info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.pointee.ai_protocol)
            if fd == -1 {
                lastReason = String(cString: strerror(errno))
                continue
            }
            if let reason = connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen, timeout: settings.timeout) {
                lastReason = reason
                Glibc.close(fd)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            return fd
        }
        throw FileProviderError(.serverUnreachable, "cannot connect to \(settings.endpoint): \(lastReason)")
    }

    /// Connects with a timeout; returns the reason on failure.
    private static func connect(
        _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t, timeout: Int
    ) -> String? {
        let flags = fcntl(fd, F_GETFL, 0)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        if Glibc.connect(fd, address, length) == -1 {
            guard errno == EINPROGRESS else { return String(cString: strerror(errno)) }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&poller, 1, Int32(timeout * 1000))
            if ready == 0 { return "timed out after \(timeout) s" }
            if ready < 0 { return String(cString: strerror(errno)) }
            var code: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &size)
            if code != 0 { return String(cString: strerror(code)) }
        }
        _ = fcntl(fd, F_SETFL, flags)
        return nil
    }

    // MARK: Authentication

    /// Tries the agent, the key files and the password, in that order.
    private func authenticate() throws(FileProviderError) {
        let user = settings.user
        var tried: [String] = []
        if settings.useAgent {
            if try authenticateWithAgent() { return }
            tried.append("ssh-agent")
        }
        let passphrase = settings.passphraseEnvironment.flatMap { ProcessInfo.processInfo.environment[$0] }
        for path in settings.identityFiles {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw FileProviderError(.invalidArgument, "the identity file \(path) cannot be read")
            }
            let rc = libssh2_userauth_publickey_fromfile_ex(raw, user, UInt32(user.utf8.count), nil, path, passphrase)
            if rc == 0 { return }
            if rc == LIBSSH2_ERROR_FILE {
                let hint = passphrase == nil
                    ? " (is it protected by a passphrase? see --passphrase-env)" : " (wrong passphrase?)"
                throw FileProviderError(.notAuthenticated, "the key \(path) cannot be used: \(lastErrorMessage)\(hint)")
            }
            if Self.isTransportError(rc) { throw Self.transportError(raw, rc, "authenticating to \(settings.endpoint)") }
            tried.append("key \(path)")
        }
        if let name = settings.passwordEnvironment {
            guard let password = ProcessInfo.processInfo.environment[name] else {
                throw FileProviderError(.notAuthenticated, "the environment variable \(name) holding the password is not set")
            }
            let rc = libssh2_userauth_password_ex(
                raw, user, UInt32(user.utf8.count), password, UInt32(password.utf8.count), nil)
            if rc == 0 { return }
            if Self.isTransportError(rc) { throw Self.transportError(raw, rc, "authenticating to \(settings.endpoint)") }
            tried.append("the password from $\(name)")
        }
        let list = tried.isEmpty
            ? "no credentials were configured (use --identity, --agent or --password-env)"
            : "tried \(tried.joined(separator: ", "))"
        throw FileProviderError(.notAuthenticated, "\(settings.endpoint) refused \(user): \(list)")
    }

    private func authenticateWithAgent() throws(FileProviderError) -> Bool {
        guard let agent = libssh2_agent_init(raw) else { return false }
        defer { libssh2_agent_free(agent) }
        guard libssh2_agent_connect(agent) == 0 else { return false }
        defer { _ = libssh2_agent_disconnect(agent) }
        guard libssh2_agent_list_identities(agent) == 0 else { return false }
        var previous: UnsafeMutablePointer<libssh2_agent_publickey>?
        while true {
            var identity: UnsafeMutablePointer<libssh2_agent_publickey>?
            if libssh2_agent_get_identity(agent, &identity, previous) != 0 { return false }
            let rc = libssh2_agent_userauth(agent, settings.user, identity)
            if rc == 0 { return true }
            if Self.isTransportError(rc) { throw Self.transportError(raw, rc, "authenticating to \(settings.endpoint)") }
            previous = identity
        }
    }
}

/// Checks the server's host key against known_hosts, before any credential is sent.
struct HostKeyCheck {
    let session: OpaquePointer
    let settings: ConnectionSettings

    /// One lock for every check in the process, so two connections never append the same key.
    private static let fileLock = NSLock()

    /// - Throws: `notAuthenticated` when the key is unknown (and accept-new is off) or differs
    ///   from the pinned one; the message names the file and the SHA256 fingerprint.
    ///   `invalidArgument` when the known_hosts file cannot be read or written.
    func verify() throws(FileProviderError) {
        var length = 0
        var type: Int32 = 0
        guard let key = libssh2_session_hostkey(session, &length, &type), length > 0 else {
            throw FileProviderError(.serverUnreachable, "\(settings.endpoint) sent no host key")
        }
        let fingerprint = Self.fingerprint(session)
        let keyBit = Self.knownHostKeyBit(type)
        let file = settings.knownHostsPath
        Self.fileLock.lock()
        defer { Self.fileLock.unlock() }
        guard let hosts = libssh2_knownhost_init(session) else {
            throw FileProviderError(.serverUnreachable, "libssh2 could not read known hosts")
        }
        defer { libssh2_knownhost_free(hosts) }
        if FileManager.default.fileExists(atPath: file) {
            if libssh2_knownhost_readfile(hosts, file, LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0 {
                throw FileProviderError(
                    .invalidArgument, "the known_hosts file \(file) cannot be read: \(SSHSession.lastMessage(session))")
            }
        }
        let mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | keyBit
        let result = libssh2_knownhost_checkp(hosts, settings.host, Int32(settings.port), key, length, mask, nil)
        switch result {
        case LIBSSH2_KNOWNHOST_CHECK_MATCH:
            return
        case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
            throw FileProviderError(
                .notAuthenticated,
                "the host key of \(settings.endpoint) has CHANGED: the server sent \(fingerprint), which differs from the key pinned in \(file). It may be an attack; if the key really changed, remove the old line for \(settings.knownHostsName) from \(file)"
            )
        default:
            if Self.hasOtherKeys(hosts, for: settings.knownHostsName) {
                throw FileProviderError(
                    .notAuthenticated,
                    "the host key of \(settings.endpoint) has CHANGED: \(file) pins a key of another type for \(settings.knownHostsName); the server sent \(fingerprint)"
                )
            }
            guard settings.acceptNewHostKey else {
                throw FileProviderError(
                    .notAuthenticated,
                    "the host key of \(settings.endpoint) is not in \(file); the server sent \(fingerprint). Check it and add it (ssh-keyscan), or add the domain with --accept-new-host-key to trust it on first use"
                )
            }
            try pin(hosts, key: key, length: length, mask: mask, file: file)
        }
    }

    /// Appends the key to the known_hosts file (creating it and its folder when needed).
    private func pin(_ hosts: OpaquePointer, key: UnsafePointer<CChar>, length: Int, mask: Int32, file: String)
        throws(FileProviderError)
    {
        var entry: UnsafeMutablePointer<libssh2_knownhost>?
        let comment = "added by fileproviderctl"
        let name = settings.knownHostsName
        if libssh2_knownhost_addc(hosts, name, nil, key, length, comment, comment.utf8.count, mask, &entry) != 0 {
            throw FileProviderError(.invalidArgument, "cannot record the host key: \(SSHSession.lastMessage(session))")
        }
        var buffer = [CChar](repeating: 0, count: 16384)
        var written = 0
        if libssh2_knownhost_writeline(hosts, entry, &buffer, buffer.count, &written, LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0 {
            throw FileProviderError(.invalidArgument, "cannot format the host key line: \(SSHSession.lastMessage(session))")
        }
        var data = buffer.prefix(written).map { UInt8(bitPattern: $0) }
        if data.last != UInt8(ascii: "\n") { data.append(UInt8(ascii: "\n")) }
        let folder = (file as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            try? FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let fd = Glibc.open(file, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        if fd == -1 {
            throw FileProviderError(.invalidArgument, "cannot open the known_hosts file \(file): \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(fd) }
        // Start on a new line if the file does not end with one.
        var info = stat()
        if fstat(fd, &info) == 0 && info.st_size > 0 {
            var last: UInt8 = 0
            if pread(fd, &last, 1, info.st_size - 1) == 1 && last != UInt8(ascii: "\n") {
                data.insert(UInt8(ascii: "\n"), at: 0)
            }
        }
        let result = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if result != data.count {
            throw FileProviderError(.invalidArgument, "cannot write the known_hosts file \(file): \(String(cString: strerror(errno)))")
        }
    }

    /// Whether known_hosts has keys (of another type) for this plain host name.
    private static func hasOtherKeys(_ hosts: OpaquePointer, for name: String) -> Bool {
        var previous: UnsafeMutablePointer<libssh2_knownhost>?
        while true {
            var entry: UnsafeMutablePointer<libssh2_knownhost>?
            if libssh2_knownhost_get(hosts, &entry, previous) != 0 { return false }
            guard let entry else { return false }
            if let raw = entry.pointee.name {
                let names = String(cString: raw).split(separator: ",")
                if names.contains(where: { $0 == name }) { return true }
            }
            previous = entry
        }
    }

    /// The known_hosts key-type bit of a libssh2 host key type.
    static func knownHostKeyBit(_ type: Int32) -> Int32 {
        switch type {
        case LIBSSH2_HOSTKEY_TYPE_RSA: return LIBSSH2_KNOWNHOST_KEY_SSHRSA
        case LIBSSH2_HOSTKEY_TYPE_DSS: return LIBSSH2_KNOWNHOST_KEY_SSHDSS
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return LIBSSH2_KNOWNHOST_KEY_ECDSA_256
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return LIBSSH2_KNOWNHOST_KEY_ECDSA_384
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return LIBSSH2_KNOWNHOST_KEY_ECDSA_521
        case LIBSSH2_HOSTKEY_TYPE_ED25519: return LIBSSH2_KNOWNHOST_KEY_ED25519
        default: return LIBSSH2_KNOWNHOST_KEY_UNKNOWN
        }
    }

    /// The key's fingerprint as OpenSSH prints it: `SHA256:` and unpadded base64.
    static func fingerprint(_ session: OpaquePointer) -> String {
        guard let hash = libssh2_hostkey_hash(session, LIBSSH2_HOSTKEY_HASH_SHA256) else { return "an unknown key" }
        var text = Data(bytes: hash, count: 32).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return "SHA256:" + text
    }
}
