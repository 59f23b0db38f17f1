import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `rclone serve webdav` on 127.0.0.1 for tests: a second WebDAV implementation beside Apache
/// `mod_dav` (Go's `x/net/webdav` over rclone's VFS), serving a folder of its own on a free port
/// picked at run time; ready once it answers, stopped by its pid.
///
/// The binary is `$RCLONE`, else `/usr/bin/rclone` (apt `rclone`, see scripts/install-deps.sh).
/// It runs as a ``ServerProcessGroup`` with an empty configuration of its own and no directory
/// cache (`--dir-cache-time 0s`), so a file written into ``root`` is listed at once.
public final class RcloneDAVServer: @unchecked Sendable {
    /// The folder the server serves at `/`.
    public let root: URL
    /// The TCP port on 127.0.0.1.
    public let port: Int
    /// The server's base URL (its `/`).
    public var url: String { "http://127.0.0.1:\(port)" }

    private let folder: URL
    private let process: ServerProcessGroup

    /// Whether rclone is installed.
    public static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: binary) }

    static var binary: String { ProcessInfo.processInfo.environment["RCLONE"] ?? "/usr/bin/rclone" }

    /// Starts a server and waits until it answers.
    ///
    /// - Parameter user: a user name and password every request must give (HTTP Basic), or
    ///   `nil` for none.
    /// - Throws: ``MediaServerError`` when rclone is missing, exits early or does not answer
    ///   within 20 seconds.
    public init(user: (name: String, password: String)? = nil) throws {
        guard Self.isAvailable else { throw MediaServerError(message: "rclone is not installed (apt-get install rclone)") }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rclone-dav-\(UUID().uuidString)")
        self.folder = folder
        root = folder.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        var options = [
            "--config", folder.appendingPathComponent("rclone.conf").path, "--dir-cache-time", "0s", "--log-level", "NOTICE",
        ]
        if let user { options += ["--user", user.name, "--pass", user.password] }
        let served = root.path
        do {
            (process, port) = try ServerProcessGroup.start(
                "rclone serve webdav", binary: Self.binary, errorLog: folder.appendingPathComponent("rclone.log"),
                arguments: { port in ["serve", "webdav", served, "--addr", "127.0.0.1:\(port)"] + options })
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
    }

    deinit { stop() }

    /// rclone's process group (its pid), for tests of the fixture.
    public var processGroup: pid_t? { process.pid }

    /// Stops rclone (`SIGKILL` to its process group) and removes its files.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Makes a new empty folder in the served root and returns its URL, for a test that needs
    /// a fresh store.
    public func makeFolder(_ name: String = "store-\(UUID().uuidString)") throws -> String {
        try FileManager.default.createDirectory(at: root.appendingPathComponent(name), withIntermediateDirectories: true)
        return url + "/" + name
    }

    /// Writes a file into the served root directly (as another client of the server would).
    public func writeFile(_ relativePath: String, _ contents: Data) throws {
        try contents.write(to: root.appendingPathComponent(relativePath))
    }
}
