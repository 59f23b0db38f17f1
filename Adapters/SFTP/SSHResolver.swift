import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// What a domain's options say about where to connect, before OpenSSH's configuration is
/// applied. Explicit options win over the configuration.
struct ConnectionRequest: Sendable, Hashable {
    /// The `host` option: a name, an address or a `Host` alias.
    var host: String
    var port: Int?
    var user: String?
    /// `--identity`, checked to exist: the only key file tried when given.
    var identityFile: String?
    var passphraseEnvironment: String?
    var passwordEnvironment: String?
    /// `--agent` as given; `nil`: as `ssh` does (`IdentityAgent`, else `SSH_AUTH_SOCK`).
    var agent: Bool?
    /// `--known-hosts`; `nil`: the configuration's `UserKnownHostsFile`.
    var knownHostsPath: String?
    var acceptNewHostKey: Bool
    var timeout: Int
    var rootPath: String
    /// `--ssh-config`, passed to `ssh -F`; `nil`: ssh's own files (`~/.ssh/config`, then
    /// `/etc/ssh/ssh_config`).
    var configFile: String?
    /// The domain's name, which its password is found by (``PasswordLookup``); `nil` outside a
    /// domain.
    var domainName: String? = nil
    /// `--netrc-file`; `nil`: `~/.netrc`.
    var netrcFile: String? = nil
}

/// What `ssh -G` (or, without `ssh`, the built-in parser) says about one host: only the
/// settings the backend uses, each checked.
struct SSHHostConfig: Sendable, Equatable {
    var hostName: String
    var port: Int
    var user: String
    /// `IdentityFile` values as ssh prints them: `~`, `%` tokens and `${VAR}` not yet expanded.
    var identityFiles: [String] = []
    var identitiesOnly = false
    /// `IdentityAgent` as ssh prints it (expanded, or `none`, `SSH_AUTH_SOCK`, `$VAR`); `nil`
    /// when not set.
    var identityAgent: String?
    /// `UserKnownHostsFile`s, expanded (the first is where new keys are written).
    var userKnownHostsFiles: [String] = []
    var proxyJump: String?
    var proxyCommand: String?
    var proxyUseFdpass = false
    /// The `%C` token as this ssh computes it (asked for as `ControlPath=%C`).
    var connectionHash: String?

    /// The most bytes of `ssh -G` output read; it prints about 5 KB.
    static let outputLimit = 256 * 1024

    /// Reads `ssh -G` output as hostile input: valid UTF-8, lines of at most 16 KiB, only the
    /// keys the backend uses, each value checked (a port of 1 to 65535, names without control
    /// characters or spaces, bounded lengths and counts); other keys are ignored.
    ///
    /// - Throws: `invalidArgument` saying what is wrong.
    init(dump bytes: [UInt8]) throws(FileProviderError) {
        func refuse(_ reason: String) -> FileProviderError {
            FileProviderError(.invalidArgument, "ssh -G printed \(reason)")
        }
        guard bytes.count <= Self.outputLimit else { throw refuse("more than \(Self.outputLimit) bytes") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw refuse("text that is not UTF-8") }
        var hostName: String?
        var port: Int?
        var user: String?
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            guard raw.utf8.count <= 16384 else { throw refuse("a line of more than 16 KiB") }
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            guard let space = line.firstIndex(of: " ") else { continue }
            let key = line[..<space]
            let value = String(line[line.index(after: space)...])
            switch key {
            case "hostname" where hostName == nil:
                guard Self.isName(value, limit: 1025) else { throw refuse("a host name that cannot be used: \(value.debugDescription)") }
                hostName = value
            case "port" where port == nil:
                guard Self.isPort(value), let number = Int(value)
                else { throw refuse("a port that is not 1 to 65535: \(value.debugDescription)") }
                port = number
            case "user" where user == nil:
                guard Self.isText(value, limit: 256) else { throw refuse("a user name that cannot be used: \(value.debugDescription)") }
                user = value
            case "identityfile":
                guard Self.isText(value, limit: 4096) else { throw refuse("an IdentityFile that cannot be used") }
                guard identityFiles.count < 64 else { throw refuse("more than 64 IdentityFiles") }
                identityFiles.append(value)
            case "identitiesonly":
                guard let flag = Self.flag(value) else { throw refuse("IdentitiesOnly \(value.debugDescription)") }
                identitiesOnly = flag
            case "identityagent" where identityAgent == nil:
                guard Self.isText(value, limit: 4096) else { throw refuse("an IdentityAgent that cannot be used") }
                identityAgent = value
            case "userknownhostsfile" where userKnownHostsFiles.isEmpty:
                let files = value.split(separator: " ").map(String.init)
                guard files.count <= 16, files.allSatisfy({ Self.isText($0, limit: 4096) }) else {
                    throw refuse("a UserKnownHostsFile list that cannot be used")
                }
                userKnownHostsFiles = files.filter { $0 != "none" }
            case "proxyjump" where proxyJump == nil:
                guard Self.isName(value, limit: 4096) else { throw refuse("a ProxyJump that cannot be used: \(value.debugDescription)") }
                if value != "none" { proxyJump = value }
            case "proxycommand" where proxyCommand == nil:
                guard Self.isText(value, limit: 8192) else { throw refuse("a ProxyCommand that cannot be used") }
                if value != "none" { proxyCommand = value }
            case "proxyusefdpass":
                guard let flag = Self.flag(value) else { throw refuse("ProxyUseFdpass \(value.debugDescription)") }
                proxyUseFdpass = flag
            case "controlpath" where connectionHash == nil:
                // Asked for as `%C`: 40 hex digits (SHA-1), else not known.
                if value.utf8.count == 40 && value.allSatisfy(\.isHexDigit) { connectionHash = value }
            default:
                continue
            }
        }
        guard let hostName else { throw refuse("no hostname") }
        guard let port else { throw refuse("no port") }
        guard let user else { throw refuse("no user") }
        self.hostName = hostName
        self.port = port
        self.user = user
    }

    init(hostName: String, port: Int, user: String) {
        self.hostName = hostName
        self.port = port
        self.user = user
    }

    /// 1 to 5 ASCII digits making 1 to 65535.
    static func isPort<Text: StringProtocol>(_ value: Text) -> Bool {
        guard (1...5).contains(value.utf8.count), value.utf8.allSatisfy({ (48...57).contains($0) }), let number = Int(value)
        else { return false }
        return (1...65535).contains(number)
    }

    private static func flag(_ value: String) -> Bool? {
        switch value {
        case "yes", "true": return true
        case "no", "false": return false
        default: return nil
        }
    }

    /// Not empty, at most `limit` bytes, no control characters.
    static func isText(_ value: String, limit: Int) -> Bool {
        !value.isEmpty && value.utf8.count <= limit
            && !value.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// Text without spaces that does not start with `-` (so it can never be read as an option).
    static func isName(_ value: String, limit: Int) -> Bool {
        isText(value, limit: limit) && !value.hasPrefix("-") && !value.contains(where: \.isWhitespace)
    }
}

/// Applies OpenSSH's configuration to a ``ConnectionRequest``: runs `ssh -G [-F file] host`, so
/// `Include`, `Match`, tokens and `/etc/ssh/ssh_config` mean what they mean to `ssh`. Without an
/// `ssh` program, the built-in parser (``SSHConfig``) reads `Host` blocks of one file.
///
/// Blocking (it runs a program): call it on a connection's thread, never on Swift's cooperative
/// pool.
struct SSHResolver {
    /// The `ssh` program; `nil`: there is none, use the built-in parser.
    var sshPath: String?
    var environment: [String: String] = ProcessInfo.processInfo.environment
    var home: String = SFTPBackend.homeFolder()
    var localUser: String = SFTPBackend.currentUser()

    /// The first `ssh` on `PATH` (else `/usr/bin/ssh`), or `nil` when there is none.
    static func findSSH(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        let folders = (environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/bin", "/bin"]
        for folder in folders where folder.hasPrefix("/") {
            let path = folder + "/ssh"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// The settings for `request`.
    ///
    /// - Throws: `invalidArgument` when the configuration cannot be read (`ssh -G` failed, or
    ///   printed what cannot be used; an explicit config file that does not exist) or asks for
    ///   what the backend cannot do (`ProxyUseFdpass`); `serverUnreachable` when `ssh -G` did
    ///   not finish within the request's timeout.
    func resolve(_ request: ConnectionRequest) throws(FileProviderError) -> ConnectionSettings {
        let config: SSHHostConfig
        if let sshPath {
            config = try runSSH(sshPath, request)
        } else {
            config = try parseConfigFile(request)
        }
        return try settings(request, config)
    }

    /// `ssh -G -T [-F file] [-p port] [-l user] -o ControlPath=%C -- host`, with the request's
    /// timeout.
    func arguments(_ sshPath: String, _ request: ConnectionRequest) -> [String] {
        var arguments = [sshPath, "-G", "-T"]
        if let file = request.configFile { arguments += ["-F", file] }
        if let port = request.port { arguments += ["-p", String(port)] }
        if let user = request.user { arguments += ["-l", user] }
        // ssh -G prints ControlPath expanded: the one way to learn its %C.
        arguments += ["-o", "ControlPath=%C", "--", request.host]
        return arguments
    }

    private func runSSH(_ sshPath: String, _ request: ConnectionRequest) throws(FileProviderError) -> SSHHostConfig {
        let arguments = arguments(sshPath, request)
        let shown = "ssh -G" + (request.configFile.map { " -F \($0)" } ?? "") + " \(request.host)"
        let captured: Subprocess.Captured
        do {
            captured = try Subprocess.run(arguments, timeout: Double(request.timeout), outputLimit: SSHHostConfig.outputLimit)
        } catch {
            switch error {
            case .cannotStart(let reason):
                throw FileProviderError(.invalidArgument, "cannot run \(sshPath) to read the ssh configuration: \(reason)")
            case .timedOut:
                throw FileProviderError(
                    .serverUnreachable,
                    "`\(shown)` did not finish within \(request.timeout) s (a Match exec command that hangs?)")
            case .tooMuchOutput:
                throw FileProviderError(.invalidArgument, "`\(shown)` printed more than \(SSHHostConfig.outputLimit) bytes")
            }
        }
        guard captured.ending == .exited(0) else {
            // ssh says what is wrong, then that it stops: the last two lines.
            let reason = Subprocess.lastLines(of: captured.errorOutput, count: 2).map { ": \($0)" } ?? ""
            throw FileProviderError(
                .invalidArgument,
                "`\(shown)` failed (\(captured.ending))\(reason); fix the ssh configuration\(request.configFile == nil ? "" : " or --ssh-config")"
            )
        }
        do {
            return try SSHHostConfig(dump: captured.output)
        } catch {
            throw FileProviderError(.invalidArgument, "`\(shown)`: \(error.message)")
        }
    }

    /// The built-in parser, for when there is no `ssh`: `Host` blocks of one file.
    private func parseConfigFile(_ request: ConnectionRequest) throws(FileProviderError) -> SSHHostConfig {
        let path = request.configFile ?? home + "/.ssh/config"
        SFTPBackend.logger.debug(
            "no ssh program on PATH: reading \(path) with the built-in parser (Host blocks only: no Include, Match, ProxyJump or /etc/ssh/ssh_config)"
        )
        let file: SSHConfig
        if let loaded = SSHConfig.load(path) {
            file = loaded
        } else if request.configFile != nil {
            throw FileProviderError(.invalidArgument, "the ssh config file \(path) cannot be read")
        } else {
            file = SSHConfig(parsing: "")
        }
        let found = file.resolve(request.host)
        var config = SSHHostConfig(
            hostName: found.hostName ?? request.host, port: request.port ?? found.port ?? 22,
            user: request.user ?? found.user ?? localUser)
        config.identityFiles =
            found.identityFiles.isEmpty
            ? ["~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa"] : found.identityFiles
        return config
    }

    /// Combines the request and the configuration.
    func settings(_ request: ConnectionRequest, _ config: SSHHostConfig) throws(FileProviderError) -> ConnectionSettings {
        guard (1...65535).contains(config.port) else {
            throw FileProviderError(.invalidArgument, "the port of \(request.host) is not 1 to 65535: \(config.port)")
        }
        if config.proxyUseFdpass {
            throw FileProviderError(
                .invalidArgument, "ProxyUseFdpass (in the ssh configuration of \(request.host)) is not supported; turn it off")
        }
        let tokens = SSHTokens(
            home: home, localUser: localUser, hostName: config.hostName, port: config.port, remoteUser: config.user,
            originalHost: request.host, connectionHash: config.connectionHash, proxyJump: config.proxyJump,
            environment: environment)
        // --identity is a path as given; the configuration's have tokens.
        var named: [String] = request.identityFile.map { [$0] } ?? []
        for file in config.identityFiles where request.identityFile == nil {
            let path = tokens.expand(file)
            if !named.contains(path) { named.append(path) }
        }
        let identities = named.filter { FileManager.default.fileExists(atPath: $0) }
        let knownHosts: [String]
        if let explicit = request.knownHostsPath {
            knownHosts = [explicit]
        } else if config.userKnownHostsFiles.isEmpty {
            knownHosts = [home + "/.ssh/known_hosts"]
        } else {
            knownHosts = config.userKnownHostsFiles.map { SSHTokens.expandTilde($0, home: home) }
        }
        var proxy: ProxyCommand?
        if let command = config.proxyCommand {
            proxy = ProxyCommand(shellCommand: tokens.expand(command, tilde: false), environment: environment)
        } else if let jump = config.proxyJump, let sshPath {
            proxy = try ProxyCommand(
                jump: jump, to: config.hostName, port: config.port, ssh: sshPath, configFile: request.configFile)
        }
        let (socket, noAgentReason) = agent(request, config)
        var settings = ConnectionSettings(
            host: config.hostName, port: config.port, user: config.user, identityFiles: identities,
            passphraseEnvironment: request.passphraseEnvironment, passwordEnvironment: request.passwordEnvironment,
            agentSocket: socket, noAgentReason: noAgentReason, agentRequested: request.agent == true,
            identitiesOnly: config.identitiesOnly, identityKeys: named, knownHostsPath: knownHosts[0],
            otherKnownHostsFiles: Array(knownHosts.dropFirst()), acceptNewHostKey: request.acceptNewHostKey,
            timeout: request.timeout, rootPath: request.rootPath, proxy: proxy, alias: request.host)
        settings.domainName = request.domainName
        settings.netrcFile = request.netrcFile
        return settings
    }

    /// The agent's socket, as `ssh` picks it: none with `--agent false` or `IdentityAgent none`
    /// (unless `--agent` asks for one), `IdentityAgent`'s (a path, `SSH_AUTH_SOCK` or `$VAR`),
    /// else `SSH_AUTH_SOCK`'s.
    func agentSocket(_ request: ConnectionRequest, _ config: SSHHostConfig) -> String? { agent(request, config).socket }

    /// ``agentSocket(_:_:)``, and when there is none, why (for messages).
    func agent(_ request: ConnectionRequest, _ config: SSHHostConfig) -> (socket: String?, noAgentReason: String) {
        if request.agent == false { return (nil, "--agent false") }
        func variable(_ name: String) -> (String?, String) {
            guard let value = environment[name], !value.isEmpty else { return (nil, "\(name) is not set") }
            return (value, "")
        }
        switch config.identityAgent {
        case nil, "SSH_AUTH_SOCK":
            return variable("SSH_AUTH_SOCK")
        case "none":
            return request.agent == true ? variable("SSH_AUTH_SOCK") : (nil, "IdentityAgent none")
        case let value? where value.hasPrefix("$"):
            return variable(String(value.dropFirst()))
        case let value?:
            return (SSHTokens.expandTilde(value, home: home), "")
        }
    }
}

/// OpenSSH's `%` tokens, `~` and `${VAR}` in a configuration value (ssh_config(5), TOKENS).
struct SSHTokens {
    var home: String
    var localUser: String
    var hostName: String
    var port: Int
    var remoteUser: String
    var originalHost: String
    var connectionHash: String?
    var proxyJump: String?
    var environment: [String: String]

    /// `text` with `~` (at the start, when `tilde`), `%` tokens and `${VAR}` expanded; an
    /// unknown token or variable is left as it is.
    func expand(_ text: String, tilde: Bool = true) -> String {
        let start = tilde ? Self.expandTilde(text, home: home) : text
        var out = ""
        var characters = start[...]
        while let character = characters.popFirst() {
            if character == "$", characters.first == "{", let end = characters.firstIndex(of: "}") {
                let name = String(characters[characters.index(after: characters.startIndex)..<end])
                if let value = environment[name] {
                    out += value
                    characters = characters[characters.index(after: end)...]
                    continue
                }
                out.append(character)
                continue
            }
            guard character == "%", let token = characters.popFirst() else {
                out.append(character)
                continue
            }
            switch token {
            case "%": out += "%"
            case "d": out += home
            case "u": out += localUser
            case "i": out += String(getuid())
            case "h": out += hostName
            case "p": out += String(port)
            case "r": out += remoteUser
            case "n", "k": out += originalHost
            case "l": out += Self.localHostName()
            case "L": out += String(Self.localHostName().prefix { $0 != "." })
            case "j": out += proxyJump ?? ""
            case "C" where connectionHash != nil: out += connectionHash ?? ""
            default: out += "%\(token)"
            }
        }
        return out
    }

    /// `~` and `~/…` as the home folder, `~user/…` as that user's.
    static func expandTilde(_ path: String, home: String) -> String {
        guard path.hasPrefix("~") else { return path }
        let slash = path.firstIndex(of: "/") ?? path.endIndex
        let name = path[path.index(after: path.startIndex)..<slash]
        if name.isEmpty { return home + path[slash...] }
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwnam_r(String(name), &entry, &buffer, buffer.count, &found) == 0, found != nil, let folder = entry.pw_dir
        else { return path }
        return String(cString: folder) + path[slash...]
    }

    static func localHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
