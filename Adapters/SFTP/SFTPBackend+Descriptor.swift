import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension SFTPBackend {
    /// The `sftp` backend kind: a folder on an SFTP server, over libssh2.
    ///
    /// Options: `host` (required; a `~/.ssh/config` alias is resolved), `port`, `user`, `root`,
    /// `identity`, `passphrase-env`, `password-env`, `agent`, `known-hosts`,
    /// `accept-new-host-key`, `connections`, `timeout`, `ssh-config`. No option holds a secret:
    /// passphrases and passwords are read from the environment variables they name, when
    /// connecting. The factory does not connect; it throws `invalidArgument` for an identity file
    /// that does not exist or a value out of range.
    public static let descriptor = BackendDescriptor(
        kind: "sftp",
        summary: "a folder on an SFTP server (OpenSSH or compatible), over libssh2",
        options: [
            BackendOption(
                name: "host", help: "the server's name or address, or a Host alias of the ssh config file",
                isRequired: true),
            BackendOption(name: "port", help: "the TCP port (default 22, or the alias's Port)", type: .integer),
            BackendOption(name: "user", help: "the user to sign in as (default: the alias's User, else the current user)"),
            BackendOption(
                name: "root", help: "the folder on the server to serve; relative to the login folder unless absolute",
                defaultValue: "."),
            BackendOption(
                name: "identity",
                help: "a private key file to sign in with (default: the alias's IdentityFile, else ~/.ssh/id_ed25519, id_ecdsa, id_rsa)",
                type: .path),
            BackendOption(
                name: "passphrase-env", help: "the name of an environment variable holding the key's passphrase"),
            BackendOption(name: "password-env", help: "the name of an environment variable holding the password"),
            BackendOption(name: "agent", help: "sign in with the keys of the running ssh-agent", type: .boolean),
            BackendOption(
                name: "known-hosts", help: "the known_hosts file the server's host key is checked against", type: .path,
                defaultValue: "~/.ssh/known_hosts"),
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
                name: "ssh-config", help: "the ssh config file host aliases are read from", type: .path,
                defaultValue: "~/.ssh/config"),
        ],
        factory: { configuration in
            try SFTPBackend(configuration: configuration)
        })

    /// Makes a backend from validated options (see ``descriptor``); does not connect.
    ///
    /// - Throws: `invalidArgument` when `host` is missing, a number is out of range, or the
    ///   identity file does not exist.
    public convenience init(configuration: BackendConfiguration) throws(FileProviderError) {
        let home = Self.homeFolder()
        let localUser = Self.currentUser()
        let alias = try configuration.string("host")
        let configPath = Self.expandTilde(configuration["ssh-config"] ?? "~/.ssh/config", home: home)
        let resolved = SSHConfig.load(configPath)?.resolve(alias, localUser: localUser, home: home) ?? SSHConfig.Resolved()
        let user = configuration["user"] ?? resolved.user ?? localUser
        let port = try configuration.integer("port") ?? resolved.port ?? 22
        guard (1...65535).contains(port) else {
            throw FileProviderError(.invalidArgument, "--port takes 1 to 65535, not \(port)")
        }
        var identities: [String]
        if let identity = configuration["identity"] {
            let path = Self.expandTilde(identity, home: home)
            guard FileManager.default.fileExists(atPath: path) else {
                throw FileProviderError(.invalidArgument, "the identity file \(path) does not exist")
            }
            identities = [path]
        } else {
            let candidates = resolved.identityFiles.isEmpty
                ? ["id_ed25519", "id_ecdsa", "id_rsa"].map { home + "/.ssh/" + $0 } : resolved.identityFiles
            identities = candidates.filter { FileManager.default.fileExists(atPath: $0) }
        }
        let timeout = try configuration.integer("timeout") ?? 30
        guard timeout >= 1 else { throw FileProviderError(.invalidArgument, "--timeout takes at least 1 second") }
        let settings = ConnectionSettings(
            host: resolved.hostName ?? alias, port: port, user: user, identityFiles: identities,
            passphraseEnvironment: configuration["passphrase-env"], passwordEnvironment: configuration["password-env"],
            useAgent: configuration.boolean("agent"),
            knownHostsPath: Self.expandTilde(configuration["known-hosts"] ?? "~/.ssh/known_hosts", home: home),
            acceptNewHostKey: configuration.boolean("accept-new-host-key"), timeout: timeout,
            rootPath: configuration["root"] ?? ".")
        try self.init(settings: settings, connections: try configuration.integer("connections") ?? 4)
    }

    static func homeFolder() -> String {
        if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty { return home }
        return NSHomeDirectory()
    }

    static func currentUser() -> String {
        if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name { return String(cString: name) }
        return ProcessInfo.processInfo.environment["USER"] ?? "root"
    }

    static func expandTilde(_ path: String, home: String) -> String {
        if path == "~" { return home }
        if path.hasPrefix("~/") { return home + path.dropFirst() }
        return path
    }
}
