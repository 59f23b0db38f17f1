import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A `media-server` process on 127.0.0.1 for tests: started over a folder on a free port
/// picked at run time, ready once `GET /` answers, stopped by its pid.
///
/// The binary is `$MEDIA_SERVER`, else the debug build of the server's own package,
/// `<repository>/Servers/media-server/.build/debug/media-server` (`make test` builds it; so does
/// `swift build --package-path Servers/media-server`). The server also exits when the test
/// process does (it watches a pipe from this process), so no server outlives a crashed test run.
public final class MediaServer: @unchecked Sendable {
    /// The folder the server serves.
    public let root: URL
    /// The TCP port on 127.0.0.1.
    public let port: Int
    /// Whether it behaves like the original media API (`--compat`).
    public let compat: Bool
    /// The base URL.
    public var url: String { "http://127.0.0.1:\(port)" }
    /// The server's process id.
    public var pid: Int32 { process.processIdentifier }

    private let process: TestProcess
    private let exit: ProcessExit
    private let stdin: Pipe
    private let removeRoot: Bool
    /// Its log, beside the root (a file in the root would be listed).
    private let log: URL
    private let lock = NSLock()
    private var stopped = false

    /// Where the binary is.
    public static func locateBinary() -> URL {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["MEDIA_SERVER"], !path.isEmpty { return URL(fileURLWithPath: path) }
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return repository.appendingPathComponent("Servers/media-server/.build/debug/media-server")
    }

    /// Starts a server and waits until it answers `GET /`.
    ///
    /// - Parameters:
    ///   - root: the folder to serve; `nil` for a new temporary folder, removed by ``stop()``.
    ///   - compat: start with `--compat` (the original API).
    ///   - arguments: more arguments for the server.
    ///   - environment: more environment variables for the server.
    /// - Throws: ``MediaServerError`` when the binary is missing, the server exits early or
    ///   does not answer within 20 seconds.
    public init(root: URL? = nil, compat: Bool = false, arguments: [String] = [], environment: [String: String] = [:]) throws {
        let folder = root ?? FileManager.default.temporaryDirectory.appendingPathComponent("media-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        self.root = folder
        removeRoot = root == nil
        self.compat = compat
        let binary = Self.locateBinary()
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw MediaServerError(
                message:
                    "media-server not found at \(binary.path); build it (swift build --package-path Servers/media-server) or set MEDIA_SERVER"
            )
        }
        var lastError = MediaServerError(message: "media-server did not start")
        var log = folder
        for _ in 0..<3 {
            let port = try FreePort.next()
            let process = TestProcess()
            process.executableURL = binary
            process.arguments =
                ["--root", folder.path, "--port", String(port), "--exit-on-stdin-eof"]
                + (compat ? ["--compat"] : []) + arguments
            var merged = ProcessInfo.processInfo.environment
            for (key, value) in environment { merged[key] = value }
            process.environment = merged
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            log = folder.deletingLastPathComponent().appendingPathComponent("media-server-\(port).log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: log)
            let exit = ProcessExit(process)
            try process.run()
            if Self.waitUntilReady(port: port, process: process) {
                self.exit = exit
                self.process = process
                self.stdin = input
                self.port = port
                self.log = log
                Self.register(process.processIdentifier, removing: removeRoot ? [folder, log] : [])
                return
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            exit.wait()
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            lastError = MediaServerError(message: "media-server on port \(port) did not become ready: \(text.suffix(2000))")
            try? FileManager.default.removeItem(at: log)
        }
        throw lastError
    }

    deinit { stop() }

    /// How many requests whose method and URI start with `prefix` (`GET /preview`) the server
    /// logged: only a server started with `--verbose` logs them (a line each, before it
    /// handles the request).
    public func requestCount(_ prefix: String) -> Int {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("request " + prefix) }.count
    }

    /// Stops the server (SIGTERM to its pid, then waits) and removes a temporary root.
    public func stop() {
        let first: Bool = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        exit.wait()
        Self.unregister(process.processIdentifier)
        try? stdin.fileHandleForWriting.close()
        if removeRoot {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: log)
        }
    }

    /// Makes a new empty folder in the served root, for a test that needs a fresh store.
    public func makeFolder(_ name: String = "store-\(UUID().uuidString)") throws -> String {
        try FileManager.default.createDirectory(at: root.appendingPathComponent(name), withIntermediateDirectories: true)
        return name
    }

    // MARK: Ports and readiness

    /// Polls `GET /` until it answers 200, the process exits, or 20 seconds pass.
    static func waitUntilReady(port: Int, process: TestProcess) -> Bool {
        for _ in 0..<400 {
            if !process.isRunning { return false }
            if let reply = rawRequest(port: port, "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"), reply.hasPrefix("HTTP/1.1 200") {
                return true
            }
            usleep(50_000)
        }
        return false
    }

    /// Sends raw bytes to 127.0.0.1:`port` and returns the reply, or `nil` when nothing answers.
    public static func rawRequest(port: Int, _ text: String) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return nil }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(text.utf8)
        guard send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else { return nil }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            reply += buffer[0..<count]
        }
        return reply.isEmpty ? nil : String(decoding: reply, as: UTF8.self)
    }

    // MARK: Servers still running when the test process exits

    /// Running servers by pid, with the temporary files to remove once they are stopped.
    nonisolated(unsafe) private static var running: [Int32: [URL]] = [:]
    private static let runningLock = NSLock()
    private static let exitHook: Void = {
        atexit {
            MediaServer.runningLock.lock()
            let servers = MediaServer.running
            MediaServer.runningLock.unlock()
            for pid in servers.keys { kill(pid, SIGTERM) }
            for url in servers.values.joined() { try? FileManager.default.removeItem(at: url) }
        }
    }()

    private static func register(_ pid: Int32, removing files: [URL]) {
        _ = exitHook
        runningLock.withLock { running[pid] = files }
    }

    private static func unregister(_ pid: Int32) {
        runningLock.withLock { _ = running.removeValue(forKey: pid) }
    }
}

/// A media-server fixture could not start.
public struct MediaServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
