import Foundation
import ProviderCore

/// What a request sends as its body.
public enum RequestBody: Sendable {
    case none
    /// `application/x-www-form-urlencoded` fields.
    case form([(String, String)])
    /// Bytes from memory with their content type (a PROPFIND's XML).
    case data(Data, contentType: String)
    /// A file streamed from disk (constant memory), as `application/octet-stream`: the body of
    /// a `PUT`, or of a `POST` for any other method. A `PUT` of a file under 64 KiB (not
    /// AWS-signed) reads it whole first and sends it with the request's head; a file that
    /// turns out shorter than `size` fails the request with `localIOFailure` before a byte goes.
    case file(path: String, size: Int64)
    /// Bytes `offset ..< offset + length` of a file, streamed from disk like `file`: one part
    /// of a multipart upload, never held in memory.
    case filePart(path: String, offset: Int64, length: Int64)

    /// Whether the body is read from a file.
    var isFile: Bool {
        switch self {
        case .file, .filePart: true
        case .none, .form, .data: false
        }
    }
}

/// Where the body of a successful (2xx) reply goes. Bodies of other replies are kept in memory
/// (at most 64 KiB) for the error message.
public enum ReplySink: Sendable {
    /// In memory, refusing replies longer than `limit` bytes.
    case memory(limit: Int)
    /// Streamed into an existing file. With `offset` > 0 the request asks for the rest of the
    /// file with `Range` and appends after the first `offset` bytes; a `200` reply rewrites the
    /// file from the start.
    case file(path: String, offset: Int64)
    /// Bytes `range` of the resource written at their offsets into an existing file, which is
    /// never truncated and never written outside `range`. The request asks for the range with
    /// `Range: bytes=a-b`; a `206` must start where asked; a `200` (a server that ignores
    /// `Range`) is skipped to the range's start. Bytes past the range end the transfer (they
    /// are never written). A reply that completes with fewer bytes than the range holds up to
    /// the end of the resource is `corruptData`; one cut off is retried from where it stopped.
    case range(path: String, range: Range<Int64>)
    /// The first range of a download that may go on in ranges (``RangedDownload``): like
    /// `file`, the file is created if missing and cut at the range's start when a successful
    /// reply begins, but the request asks for `range` only (`Range: bytes=a-b`). A `206` must
    /// start where asked; its bytes past the range end the transfer, and it must hold the range
    /// up to the end of the resource. A `200` (a server that ignores `Range`) rewrites the file
    /// with the whole body, as `file` does. A file written from its first byte loses the
    /// prefix a ranged download recorded on it (``PrefixRecord``).
    case firstRange(path: String, range: Range<Int64>)
    /// Streamed into a file from its first byte (created if missing, truncated when a
    /// successful reply starts), refusing replies longer than `limit` bytes with
    /// `corruptData`. An attempt that breaks off starts again from the first byte, never with
    /// `Range`: for replies that are read afterwards rather than resumed, such as a
    /// `PROPFIND`'s multistatus, so that a large one is never held in memory.
    case spool(path: String, limit: Int64)

    /// Where a transfer into this sink starts: the offset of a resumed `file`, a range's first
    /// byte; 0 for the others.
    var resumeOffset: Int64 {
        switch self {
        case .file(_, let offset): max(0, offset)
        case .range(_, let range), .firstRange(_, let range): range.lowerBound
        case .memory, .spool: 0
        }
    }

    /// Whether the reply is kept in memory.
    var isMemory: Bool {
        if case .memory = self { return true }
        return false
    }
}

/// The status line and headers of a reply; header names in lower case.
public struct ReplyHead: Sendable {
    public var status: Int
    public var headers: [String: String]

    public init(status: Int, headers: [String: String]) {
        self.status = status
        self.headers = headers
    }

    public subscript(name: String) -> String? { headers[name] }

    /// The whole size of the resource: the total of `Content-Range`, else `Content-Length`;
    /// `nil` when neither gives one (or `Content-Range` says `*`, unknown).
    ///
    /// - Throws: `corruptData` naming `what` (made only then) when the number is not a possible
    ///   size: not a number, negative, or over `ItemBounds.maximumSize`.
    public func resourceSize(of what: @autoclosure () -> String) throws(FileProviderError) -> Int64? {
        // Trimmed as bytes: Foundation's trim bridges to `NSString` (5% of the cooperative
        // threads' CPU of 10,000 uploads, each checked with a `HEAD`).
        let text: Substring
        if let range = headers["content-range"], let slash = range.lastIndex(of: "/") {
            text = HTTPText.trimmed(range[range.index(after: slash)...])
            if text == "*" { return nil }
        } else if let length = headers["content-length"] {
            text = HTTPText.trimmed(length)
        } else {
            return nil
        }
        guard let size = Int64(text), ItemBounds.problem(withSize: size) == nil else {
            throw FileProviderError(
                .corruptData, "\(what()): the server announced a size of \(announcedSize) bytes, which no file can have")
        }
        return size
    }

    /// The size as announced (the total of `Content-Range`, else `Content-Length`), for
    /// messages.
    public var announcedSize: String {
        let text =
            headers["content-range"].flatMap { $0.split(separator: "/").last.map(String.init) } ?? headers["content-length"] ?? "none"
        return String(text.trimmingCharacters(in: .whitespaces).prefix(40))
    }

    /// The first byte of a `206` reply's `Content-Range` (`nil` when there is none, or it is
    /// not a number).
    public var rangeStart: Int64? {
        guard let range = headers["content-range"], range.hasPrefix("bytes ") else { return nil }
        let spec = range.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        return Int64(spec[..<dash])
    }
}

/// One HTTP request.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The endpoint, such as `/media`, appended to the base URL: already percent-encoded
    /// (``HTTPClient/percentEncode(_:keepSlash:)``).
    public var endpoint: String
    /// Query fields, percent-encoded by the client.
    public var query: [(String, String)] = []
    /// Extra header lines (`If-Match: "…"`).
    public var headers: [String] = []
    public var body: RequestBody = .none
    public var sink: ReplySink = .memory(limit: 32 << 20)
    /// Statuses returned at once instead of retried (the original API's `500` for a missing
    /// folder).
    public var finalStatuses: Set<Int> = []
    /// Checks the head of a 2xx reply before its body is stored (for example that the version
    /// is the one asked for); a throw aborts the transfer with that error.
    public var validate: (@Sendable (ReplyHead) throws(FileProviderError) -> Void)?
    /// Reports bytes stored so far in a file sink and the total when known.
    public var progress: ProgressHandler?

    public init(_ method: String, _ endpoint: String, query: [(String, String)] = []) {
        self.method = method
        self.endpoint = endpoint
        self.query = query
    }
}
