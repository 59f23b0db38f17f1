import Foundation
import ProviderTesting

/// Replies of a media server with our extensions that lies, for ``FaultServer``: impossible
/// numbers in listings (negative sizes, sizes past `Int64` and `UInt64`, fractions, dates in
/// 1e300 ns or before 1700), a folder that lists itself forever (`loop/loop/…`), downloads
/// whose bodies and headers disagree with what they announce, and answers to ranged requests
/// that ignore or lie about the range (``rangeFiles``, not listed but there for `/stat`). Not a
/// conformance server: see ``MediaServer`` for that.
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

    /// Files of 100,000 bytes (``rangeContents``) whose answers to a `Range` request lie:
    /// `whole.bin` ignores it and sends the whole file (`200`); `elsewhere.bin` answers `206`
    /// from another byte; `fewer.bin` a complete `206` that holds fewer bytes than its
    /// `Content-Range` says; `cut.bin` a `206` cut off halfway; `more.bin` a `206` from the
    /// right byte with 1,000 bytes more than asked; `refused.bin` `416` for a range inside it.
    static let rangeFiles = ["whole.bin", "elsewhere.bin", "fewer.bin", "cut.bin", "more.bin", "refused.bin"]

    /// The bytes of every file of ``rangeFiles``.
    static let rangeContents: Data = {
        var state: UInt32 = 0x1234_5678
        return Data(
            (0..<100_000).map { _ in
                state = state &* 1_664_525 &+ 1_013_904_223
                return UInt8(truncatingIfNeeded: state >> 24)
            })
    }()

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
        case "/stat" where path.isEmpty && Self.rangeFiles.contains(request.query["id"] ?? ""):
            let name = request.query["id"] ?? ""
            return .reply(status: 200, headers: json, body: Data(Self.entry(name, size: String(Self.rangeContents.count)).utf8))
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
        case "/file" where Self.rangeFiles.contains(request.query["id"] ?? ""):
            return rangedDownload(request.query["id"] ?? "", range: request.headers["range"])
        case "/file":
            return download(request.query["id"] ?? "")
        default:
            return .reply(status: 404, headers: json, body: Data(#"{"error":"not found"}"#.utf8))
        }
    }

    /// The lying answers of ``rangeFiles`` to `Range: bytes=a-b`.
    private func rangedDownload(_ name: String, range: String?) -> FaultServer.Action {
        let data = Self.rangeContents
        let size = data.count
        var headers = [("ETag", "\"\(name)-1\""), ("X-Media-Modified", Self.modified)]
        let bounds = (range ?? "").dropFirst(6).split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
        guard range?.hasPrefix("bytes=") == true, bounds.count == 2, let start = bounds[0], start < size else {
            headers += [("Content-Length", String(size))]
            return .raw(status: 200, headers: headers, body: data)
        }
        let end = min(bounds[1] ?? size - 1, size - 1)
        func partial(_ first: Int, _ last: Int, body: Data) -> FaultServer.Action {
            .raw(
                status: 206,
                headers: headers + [("Content-Range", "bytes \(first)-\(last)/\(size)"), ("Content-Length", String(body.count))],
                body: body)
        }
        switch name {
        case "whole.bin":
            return .raw(status: 200, headers: headers + [("Content-Length", String(size))], body: data)
        case "elsewhere.bin":
            let first = start > 0 ? 0 : 1
            return partial(first, end, body: data.subdata(in: first..<(end + 1)))
        case "fewer.bin":
            let last = start + (end - start) / 2
            return .raw(
                status: 206,
                headers: headers + [("Content-Range", "bytes \(start)-\(end)/\(size)"), ("Content-Length", String(last - start + 1))],
                body: data.subdata(in: start..<(last + 1)))
        case "cut.bin":
            return .truncate(
                body: data.subdata(in: start..<(end + 1)), sent: (end - start + 1) / 2, status: 206,
                headers: ["ETag": "\"\(name)-1\"", "X-Media-Modified": Self.modified, "Content-Range": "bytes \(start)-\(end)/\(size)"])
        case "more.bin":
            let last = min(end + 1000, size - 1)
            return partial(start, last, body: data.subdata(in: start..<(last + 1)))
        default:
            return .raw(status: 416, headers: headers + [("Content-Range", "bytes */\(size)"), ("Content-Length", "0")], body: Data())
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
