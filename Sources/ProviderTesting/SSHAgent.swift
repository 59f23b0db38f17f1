import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real `ssh-agent` for tests, listening on a socket of its own under the temporary
/// directory (never the user's agent), stopped by pid.
///
/// ```swift
/// let agent = try await SSHAgent.started()
/// defer { agent.stop() }
/// try agent.add(server.userKey)     // ssh-add
/// // IdentityAgent \(agent.socket) in a test ssh config, or SSH_AUTH_SOCK for a child
/// ```
public final class SSHAgent: @unchecked Sendable {
    /// The agent's socket, for `SSH_AUTH_SOCK` or `IdentityAgent`.
    public let socket: String
    private let directory: URL
    private let lock = NSLock()
    private var pid: pid_t

    private init(directory: URL, socket: String, pid: pid_t) {
        self.directory = directory
        self.socket = socket
        self.pid = pid
    }

    deinit { stop() }

    /// Starts `ssh-agent -D -a SOCKET`; returns once the socket accepts connections.
    ///
    /// - Throws: ``SSHServerError`` when ssh-agent is missing or does not listen within
    ///   `timeout` seconds.
    public static func start(timeout: TimeInterval = 10) throws -> SSHAgent {
        let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("agent-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socket = directory.appendingPathComponent("agent.sock").path
        let log = directory.appendingPathComponent("agent.log").path
        let pid = try SSHServer.spawn(try SSHServer.findTool("ssh-agent"), ["-D", "-a", socket], output: log)
        let agent = SSHAgent(directory: directory, socket: socket, pid: pid)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if SSHServer.hasExited(pid) { break }
            if Self.accepts(socket) { return agent }
            usleep(10_000)  // polling a condition, bounded by the deadline
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        agent.stop()
        throw SSHServerError(message: "ssh-agent did not listen on \(socket) within \(timeout) s: \(text)")
    }

    /// ``start(timeout:)`` off the cooperative pool.
    public static func started(timeout: TimeInterval = 10) async throws -> SSHAgent {
        try await offThePool { try SSHAgent.start(timeout: timeout) }
    }

    /// Adds a private key (without a passphrase) to the agent with `ssh-add`.
    ///
    /// - Throws: ``SSHServerError`` when ssh-add fails (with its output).
    public func add(_ key: URL) throws {
        var environment = ProcessInfo.processInfo.environment
        environment["SSH_AUTH_SOCK"] = socket
        let captured: ChildProcess.Captured
        do {
            captured = try ChildProcess.capture(try SSHServer.findTool("ssh-add"), ["-q", key.path], environment: environment)
        } catch {
            throw SSHServerError(message: "cannot run ssh-add: \(error)")
        }
        guard captured.ending == .exited(0) else {
            throw SSHServerError(message: "ssh-add \(key.path) failed: \(String(decoding: captured.errorOutput, as: UTF8.self))")
        }
    }

    /// Stops the agent and removes its folder; a no-op when stopped.
    public func stop() {
        let running: pid_t = lock.withLock {
            defer { pid = 0 }
            return pid
        }
        guard running > 0 else { return }
        ChildProcess.killAndReap(running)
        try? FileManager.default.removeItem(at: directory)
    }

    /// Whether something accepts connections on the Unix socket at `path`.
    private static func accepts(_ path: String) -> Bool {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return connected == 0
    }
}
