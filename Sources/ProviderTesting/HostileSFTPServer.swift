import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A hostile SFTP server on 127.0.0.1 for tests: `Tests/Fixtures/HostileStores/hostile_sftp_server.py`
/// (Python with paramiko, installed by `scripts/install-deps.sh`), which answers with values no
/// real server sends: a size of 2^64−1, a folder that lists itself forever, a file that sends
/// fewer or more bytes than it announced, a listing whose count lies. Its tree is described at
/// the top of the script. It is not a conformance server: see ``SSHServer`` for those.
///
/// Started on a free port with its own ed25519 host key (in a known_hosts file, as
/// ``SSHServer`` does) and stopped by pid. Any public key logs in, except as the user
/// `password`, who signs in with the password ``password`` only.
public final class HostileSFTPServer: @unchecked Sendable {
    /// The only password of the user `password` (who has no key).
    public static let password = "sftp pw"
    public let port: Int
    /// Keys, known_hosts and the server's log.
    public let directory: URL
    public let userKey: URL
    public let knownHosts: URL
    private let lock = NSLock()
    private var pid: pid_t

    /// The script, found from this file's place in the checkout.
    public static let scriptPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Tests/Fixtures/HostileStores/hostile_sftp_server.py").standardizedFileURL.path

    private init(port: Int, directory: URL, pid: pid_t) {
        self.port = port
        self.directory = directory
        self.pid = pid
        userKey = directory.appendingPathComponent("id_ed25519")
        knownHosts = directory.appendingPathComponent("known_hosts")
    }

    deinit { stop() }

    /// Makes keys and starts the script; returns once it says it listens and sends an SSH banner.
    ///
    /// - Throws: ``SSHServerError`` when a key cannot be made or the server does not answer
    ///   within `timeout` seconds (the message holds its log: a missing paramiko shows there;
    ///   run `scripts/install-deps.sh`).
    public static func start(timeout: TimeInterval = 30) throws -> HostileSFTPServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hostile-sftp-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let hostKey = directory.appendingPathComponent("host_ed25519")
        try SSHServer.generateKey(at: hostKey)
        try SSHServer.generateKey(at: directory.appendingPathComponent("id_ed25519"))
        let port = try FreePort.next()
        let hostPublic = try String(contentsOf: hostKey.appendingPathExtension("pub"), encoding: .utf8)
        let line = "[127.0.0.1]:\(port) " + hostPublic.split(separator: " ").prefix(2).joined(separator: " ")
        try (line + "\n").write(to: directory.appendingPathComponent("known_hosts"), atomically: true, encoding: .utf8)
        let log = directory.appendingPathComponent("server.log").path
        let pid = try SSHServer.spawn("/usr/bin/env", ["python3", scriptPath, String(port), hostKey.path], output: log)
        let server = HostileSFTPServer(port: port, directory: directory, pid: pid)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if SSHServer.hasExited(pid) { break }
            // The script's own word that it holds the port, then a banner: a banner alone could
            // come from another server on a port that this one failed to bind.
            let said = (try? String(contentsOfFile: log, encoding: .utf8))?.contains("listening on \(port)") == true
            if said && SSHServer.answers(port: port) { return server }
            usleep(20_000)  // polling a condition, bounded by the deadline
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        server.stop()
        throw SSHServerError(message: "the hostile SFTP server on port \(port) did not start within \(timeout) s; its log:\n\(text)")
    }

    /// Stops the server (by pid) and removes its folder; a no-op when stopped.
    public func stop() {
        let running: pid_t = lock.withLock {
            defer { pid = 0 }
            return pid
        }
        guard running > 0 else { return }
        ChildProcess.killAndReap(running)
        try? FileManager.default.removeItem(at: directory)
    }

    /// Lets the reads of `/gated/gated.bin` past its first 4 MiB go on (they wait until then).
    /// - Throws: when the gate file cannot be written.
    public func openGate() throws {
        try Data().write(to: directory.appendingPathComponent("open-gate"))
    }

    /// The options of an `sftp` domain on this server. As the user `limits` the server offers
    /// `limits@openssh.com`, as OpenSSH does, so transfers go over the adapter's own channel.
    public func options(root: String = "/data", user: String = "hostile") -> [String: String] {
        [
            "host": "127.0.0.1", "port": String(port), "user": user, "identity": userKey.path,
            "known-hosts": knownHosts.path, "root": root,
        ]
    }

    /// Starts a server for `body` and stops it after, whether `body` returns or throws; both
    /// off the cooperative pool.
    public static func withStarted<T: Sendable>(_ body: (HostileSFTPServer) async throws -> T) async throws -> T {
        let server = try await offThePool { try HostileSFTPServer.start() }
        do {
            let result = try await body(server)
            _ = try? await offThePool { server.stop() }
            return result
        } catch {
            _ = try? await offThePool { server.stop() }
            throw error
        }
    }
}
