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
            let port = try FreePort.next()
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
            // The answer must come from this process: another server may have taken the port
            // between the pick and this start (this one then fails to bind and exits).
            if let reply = MediaServer.rawRequest(port: port, "OPTIONS / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
                reply.hasPrefix("HTTP/1."), listens(pid: pid, port: port)
            {
                return true
            }
            usleep(50_000)
        }
        return false
    }

    /// Whether the process `pid` holds a socket listening on TCP `port` (its descriptors'
    /// `socket:[inode]` links against `/proc/net/tcp` and `tcp6`); `true` when its descriptors
    /// cannot be read (nothing to tell by).
    static func listens(pid: pid_t, port: Int) -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return true }
        var sockets: Set<Substring> = []
        for name in names {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(name)"),
                target.hasPrefix("socket:[")
            else { continue }
            sockets.insert(Substring(target.dropFirst("socket:[".count).dropLast()))
        }
        let hexPort = String(format: "%04X", port)
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            // Read to its end: `String(contentsOfFile:)` stops after a /proc file's first 4 KiB.
            guard let handle = FileHandle(forReadingAtPath: table), let data = try? handle.readToEnd() else { continue }
            try? handle.close()
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                let fields = line.split(separator: " ")
                guard fields.count > 9, fields[3] == "0A", fields[1].hasSuffix(":" + hexPort) else { continue }
                if sockets.contains(fields[9]) { return true }
            }
        }
        return false
    }
}
