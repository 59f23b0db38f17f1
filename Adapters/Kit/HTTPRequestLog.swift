import Foundation
import Logging
import ProviderCore

/// One line per HTTP request attempt at `trace` level (`-vv`, `--log-level trace`), as
/// `rclone -vv --dump headers` shows them: method, URL, the request's own headers, status,
/// bytes sent and received, time, attempt. Secrets never appear (``LogRedaction``): a password
/// or user name in the URL, secret-looking query fields and headers are masked, and the
/// credentials libcurl sends itself (Basic, the bearer token, an AWS signature and its session
/// token) are named, never shown.
///
/// `HTTP PROPFIND http://127.0.0.1:8080/dav/ [Depth: 1] auth=basic -> 207, sent 187 B, received 1.2 KiB, 4 ms`
enum HTTPRequestLog {
    static let logger = Logger(label: "fileprovider.http")

    /// Whether request lines are logged: computing them is skipped otherwise.
    static var isEnabled: Bool { logger.logLevel <= .trace }

    /// Logs one attempt of `request` to `url` that ended in `outcome` after `seconds`.
    static func log(
        _ request: HTTPRequest, url: String, settings: ClientSettings, outcome: Attempt, seconds: Double, attempt: Int
    ) {
        guard isEnabled else { return }
        logger.trace("\(line(request, url: url, settings: settings, outcome: outcome, seconds: seconds, attempt: attempt))")
    }

    /// The line ``log(_:url:settings:outcome:seconds:attempt:)`` writes.
    static func line(
        _ request: HTTPRequest, url: String, settings: ClientSettings, outcome: Attempt, seconds: Double, attempt: Int
    ) -> String {
        var text = "HTTP \(request.method) \(LogRedaction.url(url))"
        let headers = request.headers.map(LogRedaction.header)
        if !headers.isEmpty { text += " [\(headers.joined(separator: "; "))]" }
        if settings.awsSignature != nil {
            text += " auth=aws-sigv4"
        } else if settings.basicCredentials != nil {
            text += " auth=basic"
        } else if settings.token != nil {
            text += " auth=bearer"
        } else if settings.netrcFile != nil {
            text += " auth=netrc"
        }
        let sent: Int64 =
            switch request.body {
            case .none: 0
            case .data(let data, _): Int64(data.count)
            case .form(let fields): Int64(fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 2 })
            case .file(_, let size), .filePart(_, _, let size): size
            }
        switch outcome {
        case .reply(let head, let body, let length):
            let received: Int64
            switch request.sink {
            case .memory: received = Int64(body.count)
            case .range(_, let range) where (200..<300).contains(head.status), .firstRange(_, let range) where head.status == 206:
                // `length` is where the range's bytes end in the file.
                received = length - range.lowerBound
            default: received = (200..<300).contains(head.status) ? length : Int64(body.count)
            }
            text += " -> \(head.status), sent \(RequestLogText.bytes(sent)), received \(RequestLogText.bytes(received))"
        case .failure(let error, _, _):
            text += " -> failed (\(error.code.name): \(LogRedaction.url(error.message))), sent \(RequestLogText.bytes(sent))"
        }
        text += ", \(RequestLogText.duration(seconds))"
        if attempt > 1 { text += " (attempt \(attempt))" }
        return text
    }
}
