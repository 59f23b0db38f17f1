import Foundation
import ProviderTesting

/// Replies of the original media API for a set of files in its root.
struct OriginalAPI {
    var files: [String: Data]
    var listing: String?

    static let lastModified = "Sat, 01 Jun 2024 10:00:00 GMT"

    /// The normal answer to a request, or `nil` for `GET /file` of a whole file (the
    /// request a fault applies to).
    func answer(_ request: FaultServer.Request) -> FaultServer.Action? {
        switch request.path {
        case "/":
            return .reply(status: 200, headers: ["Content-Type": "application/json"], body: Data(#"{"message":"Hello world!"}"#.utf8))
        case "/media":
            let body =
                listing ?? "[" + files.keys.sorted().map { #"{"name":"\#($0)","size":\#(files[$0]!.count)}"# }.joined(separator: ",") + "]"
            return .reply(status: 200, headers: ["Content-Type": "application/json"], body: Data(body.utf8))
        case "/file":
            guard let data = files[request.query["id"] ?? ""] else {
                return .reply(status: 404, headers: [:], body: Data("404 page not found".utf8))
            }
            if let range = request.headers["range"] {
                let start = Int(range.dropFirst(6).split(separator: "-").first ?? "0") ?? 0
                let end = range == "bytes=0-0" ? 0 : data.count - 1
                return .reply(
                    status: 206,
                    headers: ["Content-Range": "bytes \(start)-\(end)/\(data.count)", "Last-Modified": Self.lastModified],
                    body: data.subdata(in: start..<(end + 1)))
            }
            return nil
        default:
            return .reply(status: 404, headers: [:], body: Data("404 page not found".utf8))
        }
    }

    func full(_ request: FaultServer.Request) -> FaultServer.Action {
        let data = files[request.query["id"] ?? ""] ?? Data()
        return .reply(status: 200, headers: ["Last-Modified": Self.lastModified], body: data)
    }
}
