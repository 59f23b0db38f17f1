import AdapterKit
import CLibSSH2
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

// Every libssh2 call of the adapter is in this file, SFTPConnection.swift and SFTPFile.swift:
// the rest of the adapter never sees a C pointer or a raw return code.

/// Where and how to connect: a domain's options after OpenSSH's configuration was applied
/// (``SSHResolver``).
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
    /// The domain's name, which its password is found by (``PasswordLookup``).
    var domainName: String?
    /// `--netrc-file`; `nil`: `~/.netrc`.
    var netrcFile: String?
    /// The ssh-agent's socket; `nil`: no agent.
    var agentSocket: String?
    /// Why there is no agent, for messages ("SSH_AUTH_SOCK is not set", "IdentityAgent none").
    var noAgentReason = "SSH_AUTH_SOCK is not set"
    /// `--agent` asked for the agent (so its absence is worth saying).
    var agentRequested = false
    /// `IdentitiesOnly`: only agent keys that are one of ``identityKeys`` (by their `.pub`).
    var identitiesOnly = false
    /// The identity files named by the options or the configuration, whether their private
    /// key is here or not: with `IdentitiesOnly`, an agent key is offered only when one of
    /// these `.pub` files holds it (as `ssh` does).
    var identityKeys: [String] = []
    /// The known_hosts file host keys are checked against and new ones written to.
    var knownHostsPath: String
    /// More known_hosts files to check (the rest of `UserKnownHostsFile`); never written.
    var otherKnownHostsFiles: [String] = []
    var acceptNewHostKey: Bool
    /// Seconds a connection attempt or a blocking call may take.
    var timeout: Int
    /// The root folder on the server, as given (`.` is the login folder).
    var rootPath: String
    /// The program the connection goes through (`ProxyCommand`, `ProxyJump`); `nil`: TCP.
    var proxy: ProxyCommand?
    /// The `host` option as given (an alias), for messages.
    var alias: String

    init(
        host: String, port: Int, user: String, identityFiles: [String], passphraseEnvironment: String? = nil,
        passwordEnvironment: String? = nil, agentSocket: String? = nil, noAgentReason: String? = nil,
        agentRequested: Bool = false,
        identitiesOnly: Bool = false, identityKeys: [String]? = nil, knownHostsPath: String, otherKnownHostsFiles: [String] = [],
        acceptNewHostKey: Bool = false, timeout: Int = 30, rootPath: String = ".", proxy: ProxyCommand? = nil,
        alias: String? = nil
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.identityFiles = identityFiles
        self.passphraseEnvironment = passphraseEnvironment
        self.passwordEnvironment = passwordEnvironment
        self.agentSocket = agentSocket
        if let noAgentReason { self.noAgentReason = noAgentReason }
        self.agentRequested = agentRequested
        self.identitiesOnly = identitiesOnly
        self.identityKeys = identityKeys ?? identityFiles
        self.knownHostsPath = knownHostsPath
        self.otherKnownHostsFiles = otherKnownHostsFiles
        self.acceptNewHostKey = acceptNewHostKey
        self.timeout = timeout
        self.rootPath = rootPath
        self.proxy = proxy
        self.alias = alias ?? host
    }

    /// Whether another process on this machine handles every byte of the connection too: a
    /// server on a loopback address, or a proxy (it encrypts and decrypts the outer SSH
    /// connection) — they share our processors.
    var isLocal: Bool { proxy != nil || host == "localhost" || host == "::1" || host.hasPrefix("127.") }

    /// `host:port` for messages (with the alias when it differs).
    var endpoint: String {
        let address = port == 22 ? host : "\(host):\(port)"
        return alias == host ? address : "\(address) (\(alias))"
    }

    /// The host's name in known_hosts, as OpenSSH writes it.
    var knownHostsName: String { port == 22 ? host : "[\(host)]:\(port)" }
}

/// Runs `libssh2_init` once per process.
enum LibSSH2 {
    static let initialized: Bool = libssh2_init(0) == 0

    /// The version of the libssh2 this process loaded (`libssh2_version`), or `unknown`.
    static var version: String { libssh2_version(0).map { String(cString: $0) } ?? "unknown" }
}

/// The credential an SSH server accepted.
enum SSHCredential: Sendable, Equatable {
    /// A key of the ssh-agent at `socket`.
    case agent(socket: String)
    /// The private key file at `path`, unlocked with a passphrase or not.
    case key(path: String, passphrase: Bool)
    case password
}

/// A connected, authenticated SSH session, freed (and its socket closed) in `deinit`.
///
/// Used by one thread at a time: a connection of the pool lives on its own thread.
final class SSHSession: @unchecked Sendable {
    let settings: ConnectionSettings
    let raw: OpaquePointer
    private let socket: Int32
    /// The proxy the connection goes through; it owns ``socket``.
    private let proxy: ProxyConnection?
    /// The server's version banner (`SSH-2.0-OpenSSH_9.6…`).
    let banner: String
    /// What the server accepted (``OpenSSHSubsystem`` offers the same to `ssh`).
    private(set) var credential: SSHCredential = .password

    /// Connects, checks the host key against known_hosts and authenticates.
    ///
    /// Through a proxy (`ProxyCommand`, `ProxyJump`), the proxy is started first and the
    /// session runs over a socket pair connected to it; the proxy is stopped with the session.
    ///
    /// - Throws: `serverUnreachable` when the host cannot be resolved or reached, refuses the
    ///   connection or times out, or the proxy cannot be started or exits (with the proxy's
    ///   exit status and last message); `notAuthenticated` when the host key is unknown
    ///   (without accept-new) or changed, naming the known_hosts file and the key's SHA256
    ///   fingerprint, or when every credential was refused.
    init(settings: ConnectionSettings) throws(FileProviderError) {
        guard LibSSH2.initialized else {
            throw FileProviderError(.serverUnreachable, "libssh2 could not be initialized")
        }
        self.settings = settings
        let proxy: ProxyConnection?
        let socket: Int32
        if let command = settings.proxy {
            let started = try ProxyConnection(command)
            proxy = started
            socket = started.socket
        } else {
            proxy = nil
            socket = try Self.connectSocket(settings)
        }
        func release() {
            if let proxy { proxy.close() } else { Glibc.close(socket) }
        }
        guard let raw = shim_libssh2_session_init() else {
            release()
            throw FileProviderError(.serverUnreachable, "libssh2 could not make a session")
        }
        libssh2_session_set_blocking(raw, 1)
        libssh2_session_set_timeout(raw, settings.timeout * 1000)
        let rc = libssh2_session_handshake(raw, libssh2_socket_t(socket))
        if rc != 0 {
            var error = Self.transportError(raw, rc, "SSH handshake with \(settings.endpoint)")
            if let proxy {
                error = Self.proxyError(proxy, settings, rc, error)
            }
            libssh2_session_free(raw)
            release()
            throw error
        }
        self.raw = raw
        self.socket = socket
        self.proxy = proxy
        banner = libssh2_session_banner_get(raw).map { String(cString: $0) } ?? ""
        // From here on deinit frees the session and closes the socket.
        try HostKeyCheck(session: raw, settings: settings).verify()
        try authenticate()
        libssh2_keepalive_config(raw, 1, 30)
    }

    deinit {
        _ = shim_libssh2_session_disconnect(raw, "bye")
        libssh2_session_free(raw)
        if let proxy { proxy.close() } else { Glibc.close(socket) }
    }

    /// The error for a handshake through a proxy that failed: what the proxy says comes first.
    private static func proxyError(
        _ proxy: ProxyConnection, _ settings: ConnectionSettings, _ code: Int32, _ error: FileProviderError
    ) -> FileProviderError {
        // A proxy that died closed the socket pair: it is exiting, give it a moment. One that
        // hangs made the handshake time out: it is not going to say more.
        let timedOut = code == LIBSSH2_ERROR_TIMEOUT || code == LIBSSH2_ERROR_SOCKET_TIMEOUT
        let what = proxy.diagnosis(waiting: timedOut ? 0 : 2)
        return FileProviderError(
            .serverUnreachable,
            "cannot reach \(settings.endpoint) through the proxy: \(what) (\(error.message)); \(proxy.command.hint)")
    }

    /// The error for a failed session-level call; through a proxy that has ended, it says how
    /// the proxy ended and its last message.
    func transportError(_ code: Int32, _ operation: String) -> FileProviderError {
        let error = Self.transportError(raw, code, operation)
        guard let proxy, proxy.ending(waiting: 0.5) != nil else { return error }
        return FileProviderError(error.code, "\(error.message); \(proxy.diagnosis(waiting: 0))")
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
            // An alias the configuration gives no HostName is looked up as a host name.
            let hint =
                settings.host.lowercased() == settings.alias.lowercased()
                ? "; the ssh configuration gives it no HostName (see `ssh -G \(settings.alias)`): check the name, or add a `Host \(settings.alias)` block with a HostName to ~/.ssh/config (or the --ssh-config file)"
                : " (the HostName of \(settings.alias) in the ssh configuration)"
            throw FileProviderError(.serverUnreachable, "cannot resolve \(settings.host): \(reason)\(hint)")
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

    /// Tries the agent, the key files and the password, in that order, as `ssh` does.
    ///
    /// A key that cannot be used (unreadable, protected by a passphrase that was not given,
    /// of a type libssh2 cannot load) is noted and the next one tried; the error names every
    /// credential tried and why it failed.
    private func authenticate() throws(FileProviderError) {
        let user = settings.user
        var tried: [String] = []
        if let socket = settings.agentSocket {
            guard let note = try authenticateWithAgent(socket) else {
                credential = .agent(socket: socket)
                return
            }
            tried.append(note)
        } else if settings.agentRequested {
            tried.append("ssh-agent (\(settings.noAgentReason))")
        }
        var passphrase: String?
        if let name = settings.passphraseEnvironment, !settings.identityFiles.isEmpty {
            // Without it every key would look refused ("wrong passphrase?"): say what is wrong.
            guard let value = ProcessInfo.processInfo.environment[name] else {
                throw FileProviderError(.notAuthenticated, "the variable \(name) named by --passphrase-env is not set")
            }
            passphrase = value
        }
        for path in settings.identityFiles {
            guard FileManager.default.isReadableFile(atPath: path) else {
                tried.append("key \(path) (cannot be read)")
                continue
            }
            let rc = libssh2_userauth_publickey_fromfile_ex(raw, user, UInt32(user.utf8.count), nil, path, passphrase)
            if rc == 0 {
                credential = .key(path: path, passphrase: passphrase != nil)
                return
            }
            if Self.isTransportError(rc) { throw transportError(rc, "authenticating to \(settings.endpoint)") }
            if rc == LIBSSH2_ERROR_FILE {
                let hint = passphrase == nil ? "; is it protected by a passphrase? see --passphrase-env" : "; wrong passphrase?"
                tried.append("key \(path) (cannot be used: \(lastErrorMessage)\(hint))")
            } else {
                tried.append("key \(path)")
            }
        }
        // The password last, as ssh asks for it last: from the first source that has one.
        let lookup = PasswordLookup(
            domain: settings.domainName, user: user,
            machines: settings.alias == settings.host ? [settings.host] : [settings.alias, settings.host],
            environmentVariable: settings.passwordEnvironment, netrcFile: settings.netrcFile)
        let outcome = lookup.find()
        if let found = outcome.found {
            let password = found.password
            let rc = libssh2_userauth_password_ex(
                raw, user, UInt32(user.utf8.count), password, UInt32(password.utf8.count), nil)
            if rc == 0 {
                credential = .password
                return
            }
            if Self.isTransportError(rc) { throw transportError(rc, "authenticating to \(settings.endpoint)") }
            tried.append("the password from \(found.source)")
        }
        let looked = settings.identityKeys.prefix(3).joined(separator: ", ") + (settings.identityKeys.count > 3 ? ", …" : "")
        let noPassword = "no password (tried \(outcome.tried.joined(separator: ", ")))"
        let list =
            tried.isEmpty
            ? "no credentials: no ssh-agent (\(settings.noAgentReason)), no key file\(looked.isEmpty ? "" : " (looked for \(looked))"), \(noPassword); add a key to ssh-agent, use --identity, or \(PasswordLookup.advice)"
            : "tried \(tried.joined(separator: ", "))\(outcome.found == nil ? "; \(noPassword)" : "")"
        throw FileProviderError(.notAuthenticated, "\(settings.endpoint) refused \(user): \(list)")
    }

    /// Offers the agent's keys (with `IdentitiesOnly`, only those that are one of the identity
    /// files); `nil` once one is accepted, else a note on what was tried for the error.
    private func authenticateWithAgent(_ socket: String) throws(FileProviderError) -> String? {
        let name = "ssh-agent at \(socket)"
        guard let agent = libssh2_agent_init(raw) else { return "\(name) (libssh2 could not use it)" }
        defer { libssh2_agent_free(agent) }
        libssh2_agent_set_identity_path(agent, socket)
        guard libssh2_agent_connect(agent) == 0 else { return "\(name) (cannot connect: \(lastErrorMessage))" }
        defer { _ = libssh2_agent_disconnect(agent) }
        guard libssh2_agent_list_identities(agent) == 0 else { return "\(name) (cannot list its keys: \(lastErrorMessage))" }
        let allowed = settings.identitiesOnly ? Set(settings.identityKeys.compactMap(Self.publicKeyBlob)) : nil
        var previous: UnsafeMutablePointer<libssh2_agent_publickey>?
        var held = 0
        var offered = 0
        while true {
            var identity: UnsafeMutablePointer<libssh2_agent_publickey>?
            let next = libssh2_agent_get_identity(agent, &identity, previous)
            guard next == 0, let identity else { break }
            previous = identity
            held += 1
            if let allowed {
                let blob = Array(UnsafeBufferPointer(start: identity.pointee.blob, count: Int(identity.pointee.blob_len)))
                if !allowed.contains(blob) { continue }
            }
            offered += 1
            let rc = libssh2_agent_userauth(agent, settings.user, identity)
            if rc == 0 { return nil }
            if Self.isTransportError(rc) { throw transportError(rc, "authenticating to \(settings.endpoint)") }
        }
        if held == 0 { return "\(name) (it holds no keys)" }
        if offered == 0 { return "\(name) (IdentitiesOnly: none of its \(held) keys is an identity file's)" }
        return "\(name) (\(offered) key\(offered == 1 ? "" : "s"))"
    }

    /// The key of `path.pub` (the base64 field of an OpenSSH public key line), or `nil`.
    static func publicKeyBlob(_ path: String) -> [UInt8]? {
        guard let handle = FileHandle(forReadingAtPath: path + ".pub") else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: 65536), let text = String(data: data, encoding: .utf8) else { return nil }
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count >= 2, let blob = Data(base64Encoded: String(fields[1])) else { return nil }
        return Array(blob)
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
        for path in [file] + settings.otherKnownHostsFiles where FileManager.default.fileExists(atPath: path) {
            if libssh2_knownhost_readfile(hosts, path, LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0 {
                throw FileProviderError(
                    .invalidArgument, "the known_hosts file \(path) cannot be read: \(SSHSession.lastMessage(session))")
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
