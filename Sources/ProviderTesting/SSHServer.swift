import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A real OpenSSH `sshd` on 127.0.0.1 for tests, benchmarks and the demo: a free port picked at
/// start, its own generated ed25519 host key and user key, its own config and folder under the
/// temporary directory, stopped by pid.
///
/// ```swift
/// let server = try SSHServer.start()
/// defer { server.stop() }
/// let root = try server.makeFolder()   // a fresh folder the user may use as a root
/// ```
///
/// Logging in as the current user (root in CI) is allowed. Password authentication is off.
public final class SSHServer: @unchecked Sendable {
    /// Where everything lives: keys, config, log and the `data` folder.
    public let directory: URL
    /// The port sshd listens on, on 127.0.0.1.
    public let port: Int
    /// The private key of the user, for `--identity`.
    public let userKey: URL
    /// A known_hosts file holding the server's host key.
    public let knownHosts: URL
    /// The user tests log in as (the current user).
    public let user: String
    /// `[127.0.0.1]:PORT ssh-ed25519 AAAA…`, the server's known_hosts line.
    public let knownHostsLine: String

    private let config: URL
    private let log: URL
    private let lock = NSLock()
    /// The pid of the running sshd listener, 0 when stopped.
    private var pid: pid_t = 0

    /// The sshd binary.
    public static let sshdPath = "/usr/sbin/sshd"

    /// Whether sshd and ssh-keygen are installed.
    public static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: sshdPath) && (try? findTool("ssh-keygen")) != nil
    }

    private init(directory: URL, port: Int, user: String, knownHostsLine: String) {
        self.directory = directory
        self.port = port
        self.user = user
        self.knownHostsLine = knownHostsLine
        userKey = directory.appendingPathComponent("id_ed25519")
        knownHosts = directory.appendingPathComponent("known_hosts")
        config = directory.appendingPathComponent("sshd_config")
        log = directory.appendingPathComponent("sshd.log")
    }

    deinit { stop() }

    /// Generates keys and a config and starts sshd; returns once it accepts SSH connections.
    ///
    /// - Throws: ``SSHServerError`` when sshd or ssh-keygen is missing, a key cannot be made, or
    ///   sshd does not answer within `timeout` seconds (the message holds its log).
    public static func start(timeout: TimeInterval = 20) throws -> SSHServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sshd-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("data"), withIntermediateDirectories: true)
        // sshd needs its privilege separation folder.
        try? FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        let hostKey = directory.appendingPathComponent("host_ed25519")
        try generateKey(at: hostKey)
        let userKey = directory.appendingPathComponent("id_ed25519")
        try generateKey(at: userKey)
        let port = try FreePort.next()
        let hostPublic = try String(contentsOf: hostKey.appendingPathExtension("pub"), encoding: .utf8)
        let keyFields = hostPublic.split(separator: " ").prefix(2).joined(separator: " ")
        let line = "[127.0.0.1]:\(port) \(keyFields)"
        let server = SSHServer(directory: directory, port: port, user: currentUser(), knownHostsLine: line)
        try (line + "\n").write(to: server.knownHosts, atomically: true, encoding: .utf8)
        let settings = """
            ListenAddress 127.0.0.1
            Port \(port)
            HostKey \(hostKey.path)
            PidFile \(directory.appendingPathComponent("sshd.pid").path)
            AuthorizedKeysFile \(userKey.path).pub
            PubkeyAuthentication yes
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            PermitRootLogin yes
            StrictModes no
            UsePAM no
            MaxSessions 64
            MaxStartups 64:30:128
            LogLevel ERROR
            Subsystem sftp internal-sftp

            """
        try settings.write(to: server.config, atomically: true, encoding: .utf8)
        try server.launch(timeout: timeout)
        return server
    }

    /// Starts sshd again after ``stop()``, on the same port with the same keys.
    ///
    /// - Throws: ``SSHServerError`` when it does not answer within `timeout` seconds.
    public func restart(timeout: TimeInterval = 20) throws {
        stop()
        try launch(timeout: timeout)
    }

    private func launch(timeout: TimeInterval) throws {
        // Foundation's Process is not used: with a long-running child and short-lived ones
        // started from parallel tests, its exit monitor can block on the wrong pid.
        let started = try Self.spawn(Self.sshdPath, ["-D", "-e", "-f", config.path], output: log.path)
        lock.withLock { pid = started }
        Self.register(self)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if Self.hasExited(started) { break }
            if Self.answers(port: port) { return }
            usleep(20_000)  // polling a condition, bounded by the deadline
        }
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        stop()
        throw SSHServerError(message: "sshd on port \(port) did not start within \(timeout) s; its log:\n\(text)")
    }

    // Servers still running when the process exits are stopped then (a test run that ends,
    // or a failed test that never reached its `stop()`), so no sshd outlives its tests.
    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var running: [ObjectIdentifier: Weak] = [:]
    nonisolated(unsafe) private static var exitHookInstalled = false

    private struct Weak { weak var server: SSHServer? }

    private static func register(_ server: SSHServer) {
        registryLock.withLock {
            running[ObjectIdentifier(server)] = Weak(server: server)
            if !exitHookInstalled {
                exitHookInstalled = true
                atexit { SSHServer.stopAll() }
            }
        }
    }

    /// Stops every server this process started and has not stopped yet, and removes its files.
    public static func stopAll() {
        let servers = registryLock.withLock { running.values.compactMap(\.server) }
        for server in servers where server.isRunning {
            server.stop()
            server.removeFiles()
        }
    }

    /// Stops sshd and every session process it started (all by pid); a no-op when stopped.
    public func stop() {
        let listener: pid_t = lock.withLock {
            let current = pid
            pid = 0
            return current
        }
        guard listener > 0 else { return }
        // Stopped first, the listener forks no session after the list of its descendants is
        // taken: a client reconnecting at that moment would otherwise get a session that
        // outlives the server.
        kill(listener, SIGSTOP)
        let victims = Self.descendants(of: listener) + [listener]
        for victim in victims { kill(victim, SIGKILL) }
        var status: Int32 = 0
        _ = waitpid(listener, &status, 0)
        // Session processes are reparented once the listener is gone; wait until they are gone.
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, victims.contains(where: { $0 != listener && kill($0, 0) == 0 && !Self.isZombie($0) }) {
            usleep(10_000)
        }
    }

    /// Whether sshd is running.
    public var isRunning: Bool { lock.withLock { pid > 0 } }

    /// A fresh empty folder under the server's data folder, as an absolute path.
    public func makeFolder(_ prefix: String = "root") throws -> String {
        let url = directory.appendingPathComponent("data").appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    /// Removes the server's folder (call after ``stop()``).
    public func removeFiles() { try? FileManager.default.removeItem(at: directory) }

    /// The options of an `sftp` domain on this server, rooted at `root`.
    public func options(root: String) -> [String: String] {
        [
            "host": "127.0.0.1", "port": String(port), "user": user, "identity": userKey.path,
            "known-hosts": knownHosts.path, "root": root,
        ]
    }

    // MARK: Helpers

    /// Generates an ed25519 key pair without a passphrase at `url` (and `url.pub`).
    ///
    /// - Throws: ``SSHServerError`` when ssh-keygen fails.
    public static func generateKey(at url: URL, passphrase: String = "") throws {
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.removeItem(at: url.appendingPathExtension("pub"))
        let status = try run(
            try findTool("ssh-keygen"),
            ["-q", "-t", "ed25519", "-N", passphrase, "-C", "fileproviderkit-test", "-f", url.path])
        guard status == 0 else { throw SSHServerError(message: "ssh-keygen failed for \(url.path)") }
    }

    /// The SHA256 fingerprint of the server's host key, as `ssh-keygen -l` prints it.
    public func hostKeyFingerprint() throws -> String {
        let output = directory.appendingPathComponent("fingerprint-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let status = try Self.run(
            try Self.findTool("ssh-keygen"),
            ["-l", "-E", "sha256", "-f", directory.appendingPathComponent("host_ed25519.pub").path], output: output.path)
        let text = try String(contentsOf: output, encoding: .utf8)
        let fields = text.split(separator: " ")
        guard status == 0, fields.count > 1 else { throw SSHServerError(message: "ssh-keygen -l failed: \(text)") }
        return String(fields[1])
    }

    /// Starts a program with stdin from /dev/null, stdout and stderr to `output` (or /dev/null)
    /// and no other inherited descriptor; returns its pid.
    static func spawn(_ path: String, _ arguments: [String], output: String? = nil) throws -> pid_t {
        do {
            return try ChildProcess.spawn(path, arguments, output: output ?? "/dev/null", error: output ?? "/dev/null")
        } catch {
            throw SSHServerError(message: error.localizedDescription)
        }
    }

    /// Runs a program to its end; returns its exit status.
    static func run(_ path: String, _ arguments: [String], output: String? = nil) throws -> Int32 {
        let pid = try spawn(path, arguments, output: output)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    }

    /// Whether a child has exited (reaping it).
    static func hasExited(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == pid
    }

    /// Whether something on 127.0.0.1:port sends an SSH banner.
    static func answers(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return false }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4)
        let count = recv(fd, &buffer, 4, Int32(MSG_WAITALL))
        return count == 4 && buffer == Array("SSH-".utf8)
    }

    /// The processes below `pid`, from /proc.
    static func descendants(of pid: Int32) -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        var parents: [Int32: [Int32]] = [:]
        for entry in entries {
            guard let child = Int32(entry), let parent = parentPID(of: child) else { continue }
            parents[parent, default: []].append(child)
        }
        var result: [Int32] = []
        var queue = [pid]
        while let next = queue.popLast() {
            for child in parents[next] ?? [] {
                result.append(child)
                queue.append(child)
            }
        }
        return result
    }

    private static func statFields(_ pid: Int32) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    private static func parentPID(of pid: Int32) -> Int32? {
        guard let fields = statFields(pid), fields.count > 1 else { return nil }
        return Int32(fields[1])
    }

    private static func isZombie(_ pid: Int32) -> Bool {
        statFields(pid)?.first == "Z"
    }

    static func currentUser() -> String {
        if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name { return String(cString: name) }
        return ProcessInfo.processInfo.environment["USER"] ?? "root"
    }

    static func findTool(_ name: String) throws -> String {
        for folder in ["/usr/bin", "/bin", "/usr/local/bin"] {
            let path = folder + "/" + name
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw SSHServerError(message: "\(name) is not installed (apt install openssh-client)")
    }
}

/// Why the test sshd could not be started.
public struct SSHServerError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var description: String { message }
}

extension SSHServer {
    private static let sharedStartup = Task { try await offThePool { try SSHServer.start() } }

    /// One server for every test of the process that neither stops nor restarts it, started on
    /// first use off the cooperative pool.
    ///
    /// - Throws: ``SSHServerError`` when it could not be started (every caller gets the same).
    public static func shared() async throws -> SSHServer { try await sharedStartup.value }

    /// ``start(timeout:)`` off the cooperative pool.
    public static func started(timeout: TimeInterval = 20) async throws -> SSHServer {
        try await offThePool { try SSHServer.start(timeout: timeout) }
    }

    /// ``restart(timeout:)`` off the cooperative pool.
    public func restarted(timeout: TimeInterval = 20) async throws {
        try await offThePool { try self.restart(timeout: timeout) }
    }

    /// ``stop()`` off the cooperative pool.
    public func stopped() async {
        _ = try? await offThePool { self.stop() }
    }

    /// Starts a server of its own for `body`, then stops it and removes its files, whether `body`
    /// returns or throws; starting and stopping happen off the cooperative pool.
    ///
    /// - Throws: ``SSHServerError`` when the server cannot be started; whatever `body` throws.
    public static func withStarted<T: Sendable>(_ body: (SSHServer) async throws -> T) async throws -> T {
        let server = try await started()
        do {
            let result = try await body(server)
            await server.stopped()
            server.removeFiles()
            return result
        } catch {
            await server.stopped()
            server.removeFiles()
            throw error
        }
    }
}
