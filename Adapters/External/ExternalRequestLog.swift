import Foundation
import Logging
import ProviderCore

/// One line per request to an external backend program at `trace` level (`-vv`,
/// `--log-level trace`): the program, the method, its parameters as JSON (cut at 300
/// characters) with every value whose key looks secret masked (``LogRedaction/json(_:)``: the
/// options of `open` such as `password` or `api-token`), the outcome, the reply's size and the
/// time.
///
/// `external fileprovider-backend-pyfolder fetchContents {"identifier":"a.txt",…} -> ok, 93 B, 2 ms`
enum ExternalRequestLog {
    static let logger = Logger(label: "fileprovider.external")

    /// Whether request lines are logged: the parameters are not encoded for them otherwise.
    static var isEnabled: Bool { logger.logLevel <= .trace }

    /// What a request's line starts with, or `nil` when request lines are not logged: the
    /// program, the method and the masked parameters of `line` (the request as sent).
    static func start(program: String, method: String, line: Data) -> String? {
        guard isEnabled else { return nil }
        var text = "external \(program) \(method)"
        if let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any], let params = object["params"] {
            let masked = LogRedaction.json(params)
            if let data = try? JSONSerialization.data(withJSONObject: masked, options: [.sortedKeys, .withoutEscapingSlashes]) {
                var json = String(decoding: data, as: UTF8.self)
                if json.count > 300 { json = String(json.prefix(300)) + "…" }
                text += " " + json
            }
        }
        return text
    }

    /// Logs a request begun with `start` that ended in `result` after `seconds`.
    static func finish(_ start: String, result: Result<Data, FileProviderError>, seconds: Double) {
        var text = start + " -> "
        switch result {
        case .success(let reply):
            // A reply line with an error object is the program's refusal.
            if let object = try? JSONSerialization.jsonObject(with: reply) as? [String: Any], let error = object["error"] as? [String: Any]
            {
                text += "error \(error["code"].map { "\($0)" } ?? "?")"
            } else {
                text += "ok"
            }
            text += ", \(RequestLogText.bytes(Int64(reply.count)))"
        case .failure(let error):
            text += "failed (\(error.code.name): \(error.message))"
        }
        text += ", " + RequestLogText.duration(seconds)
        logger.trace("\(text)")
    }
}
