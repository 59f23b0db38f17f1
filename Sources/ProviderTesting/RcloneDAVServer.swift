import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `rclone serve webdav` on 127.0.0.1 for tests (a ``LoopbackDAVServer``): a second WebDAV implementation beside Apache
/// `mod_dav` (Go's `x/net/webdav` over rclone's VFS), serving a folder of its own on a free port
/// picked at run time; ready once it answers, stopped by its pid.
///
/// The binary is `$RCLONE`, else `/usr/bin/rclone` (apt `rclone`, see scripts/install-deps.sh).
/// It runs as a ``ServerProcessGroup`` with an empty configuration of its own and no directory
/// cache (`--dir-cache-time 0s`), so a file written into ``root`` is listed at once.
public final class RcloneDAVServer: LoopbackDAVServer, @unchecked Sendable {
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
        try super.init(scratchPrefix: "rclone-dav") { folder, root in
            var options = [
                "--config", folder.appendingPathComponent("rclone.conf").path, "--dir-cache-time", "0s", "--log-level",
                "NOTICE",
            ]
            if let user { options += ["--user", user.name, "--pass", user.password] }
            return try ServerProcessGroup.start(
                "rclone serve webdav", binary: Self.binary, errorLog: folder.appendingPathComponent("rclone.log"),
                arguments: { port in ["serve", "webdav", root.path, "--addr", "127.0.0.1:\(port)"] + options })
        }
    }
}
