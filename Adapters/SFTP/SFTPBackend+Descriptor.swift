import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension SFTPBackend {
    /// The `sftp` backend kind: a folder on an SFTP server, over libssh2.
    ///
    /// Options: `host` (required; resolved as `ssh` resolves it, with `ssh -G`), `port`, `user`,
    /// `root`, `identity`, `passphrase-env`, `password-env`, `netrc-file`, `agent`,
    /// `known-hosts`, `accept-new-host-key`, `connections`, `timeout`, `ssh-config`. No option
    /// holds a secret: passphrases are read from the environment variables they name, when
    /// connecting, and the password, tried after the keys, is looked up as ``PasswordLookup``
    /// says (the variable named by `password-env`, the systemd credential, the Secret Service,
    /// netrc with machine = `host` or the name it resolves to). The factory neither connects nor reads the ssh configuration (the first
    /// connection does); it throws `invalidArgument` for an identity file that does not exist
    /// or a value out of range.
    public static let descriptor = BackendDescriptor(
        kind: "sftp",
        summary: "a folder on an SFTP server (OpenSSH or compatible), over libssh2",
        options: [
            BackendOption(
                name: "host",
                help: "the server's name or address, or a Host alias of the ssh configuration (resolved with ssh -G, as ssh does)",
                isRequired: true),
            BackendOption(name: "port", help: "the TCP port (default: the ssh configuration's Port, else 22)", type: .integer),
            BackendOption(
                name: "user", help: "the user to sign in as (default: the ssh configuration's User, else the current user)"),
            BackendOption(
                name: "root", help: "the folder on the server to serve; relative to the login folder unless absolute",
                defaultValue: "."),
            BackendOption(
                name: "identity",
                help:
                    "a private key file to sign in with, the only one tried (default: the ssh configuration's IdentityFiles that exist, else ~/.ssh/id_ed25519, id_ecdsa, id_rsa)",
                type: .path),
            BackendOption(
                name: "passphrase-env", help: "the name of an environment variable holding the key's passphrase",
                type: .environmentVariable),
            BackendOption(
                name: "password-env",
                help:
                    "the name of an environment variable holding the password, tried first (see 'Passwords' in Docs/CLI.md for the other sources)",
                type: .environmentVariable),
            BackendOption(
                name: "netrc-file",
                help: "a netrc file whose entry for the host (machine = --host) holds the password (default: ~/.netrc)",
                type: .path),
            BackendOption(
                name: "agent",
                help:
                    "sign in with the keys of ssh-agent (default: as ssh, the configuration's IdentityAgent, else SSH_AUTH_SOCK when set; false: never)",
                type: .boolean),
            BackendOption(
                name: "known-hosts",
                help:
                    "the known_hosts file the server's host key is checked against (default: the ssh configuration's UserKnownHostsFile, else ~/.ssh/known_hosts)",
                type: .path),
            BackendOption(
                name: "accept-new-host-key",
                help: "trust an unknown host key on first use and add it to known-hosts (a changed key is always refused)",
                type: .boolean),
            BackendOption(
                name: "connections", help: "how many connections transfer at once (1-64)", type: .integer,
                defaultValue: "4"),
            BackendOption(
                name: "timeout", help: "seconds to wait for the server before giving up", type: .integer,
                defaultValue: "30"),
            BackendOption(
                name: "ssh-config",
                help: "an ssh config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config (ssh -F)",
                type: .path),
        ],
        libraryVersions: { ["libssh2": LibSSH2.version] },
        keepsFileSystemFlags: true,
        factory: { configuration in
            try SFTPBackend(configuration: configuration)
        })

    /// Makes a backend from validated options (see ``descriptor``); does not connect, and does
    /// not read the ssh configuration yet (the first connection does, on its own thread).
    ///
    /// - Throws: `invalidArgument` when `host` is missing or starts with `-`, a number is out of
    ///   range, or the identity file does not exist.
    public convenience init(configuration: BackendConfiguration) throws(FileProviderError) {
        try self.init(
            target: ConnectionTarget(request: try Self.request(configuration)),
            connections: try configuration.integer("connections") ?? 4)
    }

    /// The connection request the options make.
    ///
    /// - Throws: as ``init(configuration:)``.
    static func request(_ configuration: BackendConfiguration) throws(FileProviderError) -> ConnectionRequest {
        let home = Self.homeFolder()
        let host = try configuration.string("host")
        guard SSHHostConfig.isName(host, limit: 1025) else {
            throw FileProviderError(
                .invalidArgument, "--host takes a host name, an address or a Host alias, not \(host.debugDescription)")
        }
        let port = try configuration.integer("port")
        if let port, !(1...65535).contains(port) {
            throw FileProviderError(.invalidArgument, "--port takes 1 to 65535, not \(port)")
        }
        var identity: String?
        if let given = configuration["identity"] {
            let path = SSHTokens.expandTilde(given, home: home)
            guard FileManager.default.fileExists(atPath: path) else {
                throw FileProviderError(.invalidArgument, "the identity file \(path) does not exist")
            }
            identity = path
        }
        let timeout = try configuration.integer("timeout") ?? 30
        // At most a day, as the HTTP adapters: the connect wait is poll's Int32 of milliseconds,
        // and a larger number trapped converting to it.
        guard (1...86_400).contains(timeout) else {
            throw FileProviderError(.invalidArgument, "--timeout takes 1 to 86400 seconds, not \(timeout)")
        }
        // Domains added before ssh -G stored these defaults literally; they mean "as ssh does".
        let knownHosts = configuration["known-hosts"].flatMap { $0 == "~/.ssh/known_hosts" ? nil : $0 }
        let configFile = configuration["ssh-config"].flatMap { $0 == "~/.ssh/config" ? nil : $0 }
        return ConnectionRequest(
            host: host, port: port, user: configuration["user"], identityFile: identity,
            passphraseEnvironment: configuration["passphrase-env"], passwordEnvironment: configuration["password-env"],
            agent: configuration["agent"].map { _ in configuration.boolean("agent") },
            knownHostsPath: knownHosts.map { SSHTokens.expandTilde($0, home: home) },
            acceptNewHostKey: configuration.boolean("accept-new-host-key"),
            timeout: timeout, rootPath: configuration["root"] ?? ".",
            configFile: configFile.map { SSHTokens.expandTilde($0, home: home) }, domainName: configuration.domainName,
            netrcFile: configuration["netrc-file"].map { SSHTokens.expandTilde($0, home: home) })
    }

    static func homeFolder() -> String {
        if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty { return home }
        return NSHomeDirectory()
    }

    static func currentUser() -> String {
        if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name { return String(cString: name) }
        return ProcessInfo.processInfo.environment["USER"] ?? "root"
    }
}
