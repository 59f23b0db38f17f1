import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A server program the tests start on 127.0.0.1 (Apache, `rclone serve webdav`): spawned in a
/// session of its own with no signal blocked (what it forks is in its process group), ready
/// once it answers HTTP on its port, and stopped with `SIGKILL` to that group: by ``stop()``,
/// and at the test process's exit for the servers a whole run shares, so no server outlives the
/// tests.
final class ServerProcessGroup: @unchecked Sendable {
    /// The server's main process: the leader of its process group.
    var pid: pid_t { process.pid }
    private let process: SpawnedDaemon

    /// Starts `binary` with `arguments` for each of up to three free ports (`arguments` gets
    /// the port) and waits until it answers `OPTIONS /` on it; returns the first that does.
    ///
    /// - Parameters:
    ///   - name: the server's name in errors.
    ///   - errorLog: the file its standard output and error go to, shown when it fails.
    ///   - prepare: runs before each start with the port (to write a configuration naming it).
    /// - Throws: ``MediaServerError`` when it cannot be started, exits early or does not
    ///   answer within 20 seconds, three times.
    static func start(
        _ name: String, binary: String, errorLog: URL, extraLogs: [URL] = [], prepare: (Int) throws -> Void = { _ in },
        arguments: (Int) -> [String]
    ) throws -> (group: ServerProcessGroup, port: Int) {
        var lastError = MediaServerError(message: "\(name) did not start")
        for _ in 0..<3 {
            let port = try MediaServer.freePort()
            try prepare(port)
            let pid = try ChildProcess.spawn(
                binary, arguments(port), output: errorLog.path, error: errorLog.path, ownSession: true)
            let group = ServerProcessGroup(pid: pid)
            if waitUntilReady(port: port, pid: pid) { return (group, port) }
            group.stop()
            let text = ([errorLog] + extraLogs).compactMap { try? String(contentsOf: $0, encoding: .utf8) }.joined()
            lastError = MediaServerError(message: "\(name) on port \(port) did not become ready: \(text.suffix(2000))")
        }
        throw lastError
    }

    private init(pid: pid_t) { process = SpawnedDaemon(pid: pid, folder: nil) }

    /// Kills the process group and reaps its leader; only the first call does anything. Blocks
    /// until it is gone (at once: `SIGKILL`).
    func stop() { process.stop() }

    /// Whether something answers HTTP on `port` before the process `pid` ends (20 seconds at
    /// most).
    static func waitUntilReady(port: Int, pid: pid_t) -> Bool {
        for _ in 0..<400 {
            // Still running: not a zombie (it is not reaped here, so the pid is still its).
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let end = stat.range(of: ") ", options: .backwards), stat[end.upperBound...].first != "Z"
            else { return false }
            if let reply = MediaServer.rawRequest(port: port, "OPTIONS / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
                reply.hasPrefix("HTTP/1.")
            {
                return true
            }
            usleep(50_000)
        }
        return false
    }
}
