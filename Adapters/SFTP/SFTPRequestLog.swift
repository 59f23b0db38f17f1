import Foundation
import Logging
import ProviderCore

/// One line per SFTP operation at `trace` level (`-vv`, `--log-level trace`): what was asked
/// (`STAT`, `READDIR`, `GET`, `PUT`, `SETSTAT`/`RENAME`, `REMOVE`, `READ` of a range), the path
/// under the domain's root, the outcome (`ok` or the error's code), the bytes moved and the
/// time. No credential is ever part of it (the password, the key's passphrase and the agent's
/// keys are used by libssh2 only).
///
/// `SFTP GET user@127.0.0.1:2222 /photos/a.jpg -> ok, 1.2 MiB, 35 ms`
enum SFTPRequestLog {
    static var logger: Logger { SFTPBackend.logger }

    /// Whether request lines are logged.
    static var isEnabled: Bool { logger.logLevel <= .trace }

    /// Logs one operation that took `seconds` and ended in `outcome`; `bytes` is what moved
    /// (`nil` when nothing did).
    static func log(
        _ operation: String, _ path: String, endpoint: String, seconds: Double, error: FileProviderError?, bytes: Int64?
    ) {
        guard isEnabled else { return }
        var text = "SFTP \(operation) \(endpoint) \(path) -> "
        if let error {
            text += "failed (\(error.code.name): \(error.message))"
        } else {
            text += "ok"
            if let bytes { text += ", \(RequestLogText.bytes(bytes))" }
        }
        text += ", " + RequestLogText.duration(seconds)
        logger.trace("\(text)")
    }
}
