import Foundation
import ProviderCore

/// The SFTP subsystem reached through OpenSSH's own client (`ssh -s HOST sftp`), as `sftp`,
/// `sshfs` and `scp` reach it: the transport of the channel a connection's large transfers and
/// ranged reads go over (``SFTPConnection/transferChannel()``); listings, batches of small
/// files and renames stay on libssh2's second channel, where a round trip costs less.
///
/// Why: Debian 12's libssh2 1.10 offers only AES-CTR with HMAC-SHA2 and decrypts one 16-byte
/// block per OpenSSL call, about 1.5 CPU-seconds per GiB in our process, which made every large
/// transfer bound by that one core; `ssh` decrypts in bulk (AES-GCM or ChaCha20-Poly1305, on
/// its own core). The connection itself (its first channel, libssh2's SFTP calls, and its
/// second) stays libssh2's.
///
/// `ssh` gets exactly the settings libssh2 used, with no configuration file of its own
/// (`-F /dev/null`): the resolved host, port and user, the credential the server accepted on
/// the libssh2 connection (an agent's keys, or a key file without a passphrase), the same
/// known_hosts files with `StrictHostKeyChecking=yes` (the libssh2 connection checked, or
/// added, the host key first), `BatchMode=yes` (it never asks), and the timeout. Not used, so
/// libssh2's channel serves as before: when `ssh` is not installed, for a password, a key
/// unlocked with a passphrase, a proxy, a known_hosts path with a space, or when
/// `FILEPROVIDER_SFTP_CHANNEL=libssh2` is set. When `ssh` fails (refused, or exits), the
/// connection falls back to libssh2's channel.
enum OpenSSHSubsystem {
    /// The environment variable that turns it off (`libssh2`).
    static let switchVariable = "FILEPROVIDER_SFTP_CHANNEL"

    /// The ciphers offered, fastest first where the processor has AES instructions.
    static let ciphers = [
        "aes128-gcm@openssh.com", "chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes192-ctr",
        "aes256-ctr",
    ]

    /// The `ssh` command for a connection made with `settings` and accepted with `credential`,
    /// or `nil` where libssh2's channel is used instead (see above).
    static func command(
        _ settings: ConnectionSettings, credential: SSHCredential, ssh: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> ProxyCommand? {
        guard environment[switchVariable] != "libssh2", let ssh, settings.proxy == nil else { return nil }
        let knownHosts = [settings.knownHostsPath] + settings.otherKnownHostsFiles
        guard knownHosts.allSatisfy({ !$0.contains(where: { $0 == " " || $0 == "\"" }) }) else { return nil }
        var options = [
            "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "UserKnownHostsFile=\(knownHosts.joined(separator: " "))", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "CheckHostIP=no", "-o", "UpdateHostKeys=no", "-o", "ConnectTimeout=\(settings.timeout)",
            "-o", "ServerAliveInterval=\(max(1, settings.timeout / 3))", "-o", "ServerAliveCountMax=3",
            "-o", "Ciphers=\(ciphers.joined(separator: ","))", "-o", "LogLevel=ERROR", "-o", "ClearAllForwardings=yes",
            "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no",
        ]
        switch credential {
        case .agent(let socket):
            options += ["-o", "IdentityAgent=\(socket)"]
            if settings.identitiesOnly {
                options += ["-o", "IdentitiesOnly=yes"] + settings.identityKeys.flatMap { ["-i", $0] }
            }
        case .key(let path, let passphrase):
            guard !passphrase else { return nil }
            options += ["-o", "IdentityAgent=none", "-o", "IdentitiesOnly=yes", "-i", path]
        case .password:
            return nil
        }
        let arguments =
            [ssh] + options + ["-p", String(settings.port), "-l", settings.user, "-x", "-a", "-T", "-s", "--", settings.host, "sftp"]
        return ProxyCommand(
            arguments: arguments, summary: "ssh to \(settings.endpoint) for its SFTP channel",
            hint: "set \(switchVariable)=libssh2 to use libssh2's own channel instead")
    }
}
