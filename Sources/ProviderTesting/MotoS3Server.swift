import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// moto's server mode (PyPI `moto[server]`, installed by scripts/install-deps.sh) on 127.0.0.1
/// for the S3 adapter's tests: a second, independent implementation of S3 beside SeaweedFS
/// (Python, in memory), on a free port picked at run time, ready once it answers, stopped by
/// its process group. It accepts any keys (it checks no signature).
public final class MotoS3Server: @unchecked Sendable {
    /// The server's URL (`http://127.0.0.1:PORT`).
    public let endpoint: String
    public let accessKey = "moto-access"
    public let secretKey = "moto-secret"
    public let region = "us-east-1"
    private let process: ServerProcessGroup
    private let folder: URL

    /// Starts the server and waits until it answers.
    ///
    /// - Throws: ``MediaServerError`` when moto is not installed, exits early or does not
    ///   answer within 20 seconds.
    public init() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("moto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let check = try ChildProcess.capture("/usr/bin/env", ["python3", "-c", "import moto.server, flask"])
        guard check.ending == .exited(0) else {
            throw MediaServerError(
                message: "moto's server is not installed (python3 -m pip install 'moto[server]'; see scripts/install-deps.sh)")
        }
        let started: (group: ServerProcessGroup, port: Int)
        do {
            started = try ServerProcessGroup.start(
                "moto_server", binary: "/usr/bin/env", errorLog: folder.appendingPathComponent("moto.log"),
                arguments: { port in ["python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", "\(port)"] })
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
        process = started.group
        endpoint = "http://127.0.0.1:\(started.port)"
        self.folder = folder
    }

    deinit { stop() }

    /// Stops the server and removes its log.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Makes a bucket with `curl --aws-sigv4`, and returns its name.
    ///
    /// - Throws: ``MediaServerError`` when curl fails or the server refuses.
    public func makeBucket(_ name: String = "b-\(UUID().uuidString.lowercased().prefix(13))") throws -> String {
        let result = try ChildProcess.capture(
            "/usr/bin/curl",
            [
                "-sS", "--aws-sigv4", "aws:amz:\(region):s3", "-u", "\(accessKey):\(secretKey)", "-X", "PUT", "-o", "/dev/null",
                "-w", "%{http_code}", "\(endpoint)/\(name)",
            ])
        let status = String(decoding: result.output, as: UTF8.self)
        guard result.ending == .exited(0), status == "200" else {
            throw MediaServerError(message: "making the bucket \(name) failed: \(status)")
        }
        return name
    }
}
