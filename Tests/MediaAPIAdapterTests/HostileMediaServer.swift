import Foundation

/// Replies of a media server with our extensions that lies, for ``FaultServer``: impossible
/// numbers in listings (negative sizes, sizes past `Int64` and `UInt64`, fractions, dates in
/// 1e300 ns or before 1700), a folder that lists itself forever (`loop/loop/…`), and downloads
/// whose bodies and headers disagree with what they announce. Not a conformance server: see
/// ``MediaServer`` for that.
struct HostileMediaAPI {
    static let modified = "1700000000000000000"

    /// Every entry of the root, as raw JSON (the numbers as the server writes them).
    static let rootEntries: [(name: String, json: String)] = [
        ("big-date.txt", entry("big-date.txt", size: "3", modified: "1e300")),
        ("early.txt", entry("early.txt", size: "3", modified: "-9000000000000000000")),
        ("fraction.bin", entry("fraction.bin", size: "1.5")),
        ("good.txt", entry("good.txt", size: "5")),
        ("huge.bin", entry("huge.bin", size: "18446744073709551616")),
        ("long.bin", entry("long.bin", size: "10")),
        ("loop", folder("loop")),
        ("negative.bin", entry("negative.bin", size: "-5")),
        ("over.bin", entry("over.bin", size: "9223372036854775808")),
        ("range.bin", entry("range.bin", size: "10")),
        ("short.bin", entry("short.bin", size: "100")),
        ("unknown-total.bin", entry("unknown-total.bin", size: "10")),
    ]

    static func entry(_ name: String, size: String, modified: String = modified) -> String {
        #"{"name":"\#(name)","size":\#(size),"type":"file","modified":\#(modified),"etag":"\#(name)-1"}"#
    }

    static func folder(_ name: String) -> String {
        #"{"name":"\#(name)","size":0,"type":"folder","modified":\#(modified),"etag":"\#(name)-d"}"#
    }

    func answer(_ request: FaultServer.Request) -> FaultServer.Action {
        let json = ["Content-Type": "application/json"]
        let path = request.query["path"] ?? ""
        switch request.path {
        case "/capabilities":
            let extensions = [
                "typed-listing", "listing-pages", "stat", "etag", "conditional-writes", "atomic-uploads", "move",
                "conditional-delete",
            ]
            let body = #"{"api":"media","version":1,"extensions":["# + extensions.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
            return .reply(status: 200, headers: json, body: Data(body.utf8))
        case "/stat" where request.query["id"] == nil && path.isEmpty:
            return .reply(status: 200, headers: json, body: Data(Self.folder("").utf8))
        case "/media":
            let entries: [String]
            if path.isEmpty {
                entries = Self.rootEntries.map(\.json)
            } else if (path == "loop" || path.hasSuffix("/loop")) && path.utf8.count < 3_000 {
                // Listed inside itself, forever (bounded here only so a broken engine ends too).
                entries = [Self.entry("leaf.txt", size: "1"), Self.folder("loop")]
            } else {
                return .reply(status: 404, headers: json, body: Data(#"{"error":"no such folder"}"#.utf8))
            }
            let after = request.query["after"]
            let page = after == nil ? entries : []
            return .reply(status: 200, headers: json, body: Data(("[" + page.joined(separator: ",") + "]").utf8))
        case "/file":
            return download(request.query["id"] ?? "")
        default:
            return .reply(status: 404, headers: json, body: Data(#"{"error":"not found"}"#.utf8))
        }
    }

    private func download(_ name: String) -> FaultServer.Action {
        func headers(_ extra: [(String, String)] = []) -> [(String, String)] {
            [("ETag", "\"\(name)-1\""), ("X-Media-Modified", Self.modified)] + extra
        }
        switch name {
        case "good.txt":
            return .raw(status: 200, headers: headers([("Content-Length", "5")]), body: Data("hello".utf8))
        case "leaf.txt":
            return .raw(status: 200, headers: headers([("Content-Length", "1")]), body: Data("L".utf8))
        case "short.bin":
            // Announces 100 bytes, sends 40 and closes.
            return .raw(status: 200, headers: headers([("Content-Length", "100")]), body: Data(repeating: 0x73, count: 40))
        case "long.bin":
            // Announces 10 bytes, sends 30.
            return .raw(status: 200, headers: headers([("Content-Length", "10")]), body: Data(repeating: 0x6c, count: 30))
        case "range.bin":
            // A Content-Range whose total no file can have.
            return .raw(
                status: 206, headers: headers([("Content-Range", "bytes 0-9/-5"), ("Content-Length", "10")]),
                body: Data(repeating: 0x72, count: 10))
        case "unknown-total.bin":
            // A negative Content-Length.
            return .raw(status: 200, headers: headers([("Content-Length", "-10")]), body: Data(repeating: 0x75, count: 10))
        default:
            return .reply(status: 404, headers: [:], body: Data(#"{"error":"no such file"}"#.utf8))
        }
    }
}
