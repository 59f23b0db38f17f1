import CCurl
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

// Every libcurl call of the adapter is in this file. The rest of the adapter sends an
// `HTTPRequest` and gets an `HTTPReply` or a `FileProviderError`; it never sees a CURL handle,
// a CURLcode or a raw status it has not asked for.

/// What a request sends as its body.
enum RequestBody: Sendable {
    case none
    /// `application/x-www-form-urlencoded` fields.
    case form([(String, String)])
    /// A file streamed from disk (constant memory), as `application/octet-stream`.
    case file(path: String, size: Int64)
}

/// Where the body of a successful (2xx) reply goes. Bodies of other replies are kept in memory
/// (at most 64 KiB) for the error message.
enum ReplySink: Sendable {
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
}

/// The status line and headers of a reply; header names in lower case.
struct ReplyHead: Sendable {
    var status: Int
    var headers: [String: String]

    subscript(name: String) -> String? { headers[name] }

    /// The whole size of the resource: the total of `Content-Range`, else `Content-Length`;
    /// `nil` when neither gives one (or `Content-Range` says `*`, unknown).
    ///
    /// - Throws: `corruptData` naming `what` when the number is not a possible size: not a
    ///   number, negative, or over ``ItemBounds/maximumSize``.
    func resourceSize(of what: String) throws(FileProviderError) -> Int64? {
        let text: String
        if let range = headers["content-range"], let slash = range.lastIndex(of: "/") {
            text = range[range.index(after: slash)...].trimmingCharacters(in: .whitespaces)
            if text == "*" { return nil }
        } else if let length = headers["content-length"] {
            text = length.trimmingCharacters(in: .whitespaces)
        } else {
            return nil
        }
        guard let size = Int64(text), ItemBounds.problem(withSize: size) == nil else {
            throw FileProviderError(
                .corruptData, "\(what): the server announced a size of \(announcedSize) bytes, which no file can have")
        }
        return size
    }

    /// The size as announced (the total of `Content-Range`, else `Content-Length`), for
    /// messages.
    var announcedSize: String {
        let text =
            headers["content-range"].flatMap { $0.split(separator: "/").last.map(String.init) } ?? headers["content-length"] ?? "none"
        return String(text.trimmingCharacters(in: .whitespaces).prefix(40))
    }

    /// The first byte of a `206` reply's `Content-Range` (`nil` when there is none, or it is
    /// not a number).
    var rangeStart: Int64? {
        guard let range = headers["content-range"], range.hasPrefix("bytes ") else { return nil }
        let spec = range.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        return Int64(spec[..<dash])
    }
}

/// One HTTP request of the media API.
struct HTTPRequest: Sendable {
    var method: String
    /// The endpoint, such as `/media`, appended to the base URL.
    var endpoint: String
    /// Query fields, percent-encoded by the client.
    var query: [(String, String)] = []
    /// Extra header lines (`If-Match: "…"`).
    var headers: [String] = []
    var body: RequestBody = .none
    var sink: ReplySink = .memory(limit: 32 << 20)
    /// Statuses returned at once instead of retried (the original API's `500` for a missing
    /// folder).
    var finalStatuses: Set<Int> = []
    /// Checks the head of a 2xx reply before its body is stored (for example that the version
    /// is the one asked for); a throw aborts the transfer with that error.
    var validate: (@Sendable (ReplyHead) throws(FileProviderError) -> Void)?
    /// Reports bytes stored so far in a file sink and the total when known.
    var progress: ProgressHandler?

    init(_ method: String, _ endpoint: String, query: [(String, String)] = []) {
        self.method = method
        self.endpoint = endpoint
        self.query = query
    }
}

/// A reply after retries.
struct HTTPReply: Sendable {
    var head: ReplyHead
    /// The body of a memory sink, or the start of an error reply's body.
    var body: Data
    /// The length of the sink file after a file download.
    var fileLength: Int64
    /// How many attempts it took.
    var attempts: Int
    /// What was asked, for messages.
    var what: String

    var status: Int { head.status }
    var isSuccess: Bool { (200..<300).contains(head.status) }

    /// The server's error text: the `error` field of a JSON body, else the body as text.
    var errorText: String {
        if let reply = try? JSONDecoder().decode(ErrorReply.self, from: body), let text = reply.error ?? reply.message {
            return text
        }
        let text = String(decoding: body.prefix(500), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "no details" : text
    }

    /// Throws the error a non-2xx status means: 400 `invalidArgument`; 401/403
    /// `notAuthenticated`; 404 `noSuchItem`; 409 `filenameCollision`; 412 `versionOutOfDate`;
    /// 413 `insufficientQuota`; 429 and 5xx (after retries) `serverUnreachable`; 507
    /// `insufficientQuota`; anything else `corruptData`.
    func check() throws(FileProviderError) {
        if isSuccess { return }
        let text = "\(what): the server answered \(status) (\(errorText))"
        switch status {
        case 400: throw FileProviderError(.invalidArgument, text)
        case 401, 403:
            throw FileProviderError(.notAuthenticated, "\(text); check the bearer token (--token-env)")
        case 404: throw FileProviderError(.noSuchItem, text)
        case 409: throw FileProviderError(.filenameCollision, text)
        case 412: throw FileProviderError(.versionOutOfDate, text)
        case 413, 507: throw FileProviderError(.insufficientQuota, text)
        case 429, 500...599:
            throw FileProviderError(.serverUnreachable, "\(text) after \(attempts) attempt\(attempts == 1 ? "" : "s")")
        default: throw FileProviderError(.corruptData, "\(text), which the media API does not use")
        }
    }

    /// Decodes a JSON body.
    /// - Throws: `corruptData` when it is not the JSON expected.
    func decode<T: Decodable>(_ type: T.Type) throws(FileProviderError) -> T {
        do {
            return try JSONDecoder().decode(type, from: body)
        } catch {
            throw FileProviderError(.corruptData, "\(what): the reply is not the JSON expected (\(error))")
        }
    }
}

/// How the client connects.
struct ClientSettings: Sendable {
    /// The base URL without a trailing slash: `http://127.0.0.1:8080` or `https://host/api`.
    var baseURL: String
    /// A bearer token for `Authorization`, or `nil`.
    var token: String?
    /// A CA bundle for HTTPS, or `nil` for the system's.
    var caFile: String?
    var connectTimeout: Double = 10
    /// Seconds without any byte moving before a transfer is abandoned.
    var stallTimeout: Double = 30
    var connections: Int = 4
    /// Retries after the first attempt, for connection errors, 429 and 5xx.
    var retries: Int = 4
    /// The first backoff delay in seconds; doubled on each retry, with jitter.
    var backoff: Double = 0.2
    /// The longest wait between attempts, in seconds, also for `Retry-After`.
    var maximumDelay: Double = 30
}

/// Set when the task waiting on a transfer is cancelled; the transfer checks it as bytes move.
final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var cancelled = false

    func cancel() { lock.withLock { cancelled = true } }
    var isCancelled: Bool { lock.withLock { cancelled } }
}

/// An HTTP/1.1 client on libcurl: a pool of connections, each a reused easy handle (keep-alive)
/// on a thread of its own, never on Swift's cooperative pool.
final class HTTPClient: Sendable {
    let settings: ClientSettings
    private let pool: ConnectionPool

    private static let globalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))

    /// The version of the libcurl this process loaded and its TLS library, from `curl_version()`
    /// (`libcurl/8.5.0 OpenSSL/3.0.13 zlib/…`): `8.5.0 (OpenSSL/3.0.13)`; `unknown` when it says
    /// nothing usable.
    static var libraryVersion: String {
        guard let text = curl_version().map({ String(cString: $0) }) else { return "unknown" }
        let words = text.split(separator: " ")
        guard let first = words.first, first.hasPrefix("libcurl/") else { return "unknown" }
        let version = String(first.dropFirst("libcurl/".count))
        let tls = words.dropFirst().first { word in
            ["OpenSSL/", "GnuTLS/", "mbedTLS/", "wolfSSL/", "BoringSSL", "LibreSSL/", "rustls"].contains { word.hasPrefix($0) }
        }
        return tls.map { "\(version) (\($0))" } ?? version
    }

    /// - Throws: `invalidArgument` when libcurl cannot be set up.
    init(settings: ClientSettings) throws(FileProviderError) {
        guard Self.globalInit == CURLE_OK else {
            throw FileProviderError(.invalidArgument, "libcurl could not be initialized")
        }
        self.settings = settings
        var connections: [Connection] = []
        for index in 0..<max(1, settings.connections) {
            guard let connection = Connection(index: index) else {
                throw FileProviderError(.invalidArgument, "libcurl could not make a connection handle")
            }
            connections.append(connection)
        }
        pool = ConnectionPool(connections)
    }

    /// Stops the connection threads once their work is done.
    func close() { pool.shutDown() }

    /// Sends a request, retrying connection errors, 429 and 5xx with exponential backoff and
    /// jitter (honouring `Retry-After`), at most `settings.retries` times. A download into a file
    /// resumes with `Range` after what earlier attempts stored.
    ///
    /// Returns the reply of the last attempt whatever its status; call ``HTTPReply/check()``.
    /// - Throws: `serverUnreachable` when the server cannot be reached, a transfer stalls or
    ///   breaks off on the last attempt; `notAuthenticated` when the server's certificate is
    ///   not trusted; `localIOFailure` when the sink or the body file fails; `cancelled` when
    ///   `cancellation` is set; what `request.validate` throws; `corruptData` when a memory
    ///   reply is over its limit or a resumed reply does not start where asked.
    func send(_ request: HTTPRequest, cancellation: CancellationFlag) async throws(FileProviderError) -> HTTPReply {
        let url = settings.baseURL + request.endpoint + Self.encodeQuery(request.query)
        let what = "\(request.method) \(request.endpoint)"
        var resumeAt: Int64 = 0
        switch request.sink {
        case .file(_, let offset): resumeAt = max(0, offset)
        case .range(_, let range): resumeAt = range.lowerBound
        case .memory: break
        }
        var attempt = 0
        while true {
            attempt += 1
            if cancellation.isCancelled || Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
            let connection = await pool.acquire()
            let settings = self.settings
            let start = resumeAt
            let outcome: Attempt
            do {
                outcome = try await connection.executor.run { () -> Attempt in
                    connection.perform(request, url: url, settings: settings, resumeAt: start, cancellation: cancellation)
                }
            } catch {
                pool.release(connection)
                throw error
            }
            pool.release(connection)
            let retriesLeft = attempt <= settings.retries
            switch outcome {
            case .reply(let head, let body, let length):
                let reply = HTTPReply(head: head, body: body, fileLength: length, attempts: attempt, what: what)
                let retryable = head.status == 429 || (500...599).contains(head.status) && head.status != 507
                if retryable && retriesLeft && !request.finalStatuses.contains(head.status) {
                    await pause(attempt: attempt, retryAfter: head["retry-after"])
                    continue
                }
                return reply
            case .failure(let error, let retryable, let stored):
                switch request.sink {
                case .file, .range: if stored > resumeAt { resumeAt = stored }
                case .memory: break
                }
                if retryable && retriesLeft {
                    await pause(attempt: attempt, retryAfter: nil)
                    continue
                }
                var final = error
                if retryable { final.message += " (after \(attempt) attempt\(attempt == 1 ? "" : "s"))" }
                throw final
            }
        }
    }

    /// Waits before the next attempt: `Retry-After` when the server gave one, else an
    /// exponential backoff with jitter; never longer than `maximumDelay`.
    private func pause(attempt: Int, retryAfter: String?) async {
        var delay = settings.backoff * pow(2, Double(attempt - 1))
        delay *= Double.random(in: 0.5...1.5)
        if let retryAfter, let seconds = Self.retryAfterSeconds(retryAfter) { delay = max(delay, seconds) }
        delay = min(delay, settings.maximumDelay)
        try? await Task.sleep(nanoseconds: UInt64(delay * 1e9))
    }

    /// `Retry-After` as seconds: a number or an HTTP date.
    static func retryAfterSeconds(_ value: String) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(text) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text).map { max(0, $0.timeIntervalSinceNow) }
    }

    /// `?a=b&c=d` with everything but unreserved characters and `/` percent-encoded (a space is
    /// `%20`, a `+` is `%2B`).
    static func encodeQuery(_ fields: [(String, String)]) -> String {
        if fields.isEmpty { return "" }
        return "?" + fields.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    static func percentEncode(_ text: String, keepSlash: Bool = true) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepSlash:
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The outcome of one attempt.
enum Attempt: Sendable {
    /// A complete reply (any status), with the body of a memory sink and the length of a file
    /// sink.
    case reply(ReplyHead, Data, Int64)
    /// No complete reply. `stored` is the length of the sink file, for resuming.
    case failure(FileProviderError, retryable: Bool, stored: Int64)
}

/// Idle connections and the tasks waiting for one.
final class ConnectionPool: @unchecked Sendable {
    private let lock = NSLock()
    private var idle: [Connection]
    private var all: [Connection]
    private var waiters: [CheckedContinuation<Connection, Never>] = []

    init(_ connections: [Connection]) {
        idle = connections
        all = connections
    }

    func acquire() async -> Connection {
        await withCheckedContinuation { continuation in
            lock.lock()
            if let connection = idle.popLast() {
                lock.unlock()
                continuation.resume(returning: connection)
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }

    func release(_ connection: Connection) {
        lock.lock()
        if waiters.isEmpty {
            idle.append(connection)
            lock.unlock()
        } else {
            let waiter = waiters.removeFirst()
            lock.unlock()
            waiter.resume(returning: connection)
        }
    }

    func shutDown() {
        lock.withLock { all }.forEach { $0.executor.shutDown() }
    }
}

/// One keep-alive connection: a curl easy handle used only on its own thread.
final class Connection: @unchecked Sendable {
    let executor: BlockingExecutor
    private let handle: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init?(index: Int) {
        guard let handle = curl_easy_init() else { return nil }
        self.handle = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        executor = BlockingExecutor(name: "media-http-\(index)", threads: 1)
    }

    deinit {
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// Runs one attempt on the calling thread (the connection's own).
    func perform(
        _ request: HTTPRequest, url: String, settings: ClientSettings, resumeAt: Int64, cancellation: CancellationFlag
    ) -> Attempt {
        let transfer = Transfer(request: request, resumeAt: resumeAt, cancellation: cancellation)
        defer { transfer.closeFiles() }
        if let error = transfer.openFiles() { return .failure(error, retryable: false, stored: resumeAt) }

        curl_easy_reset(handle)  // keeps the live connection for keep-alive
        errorBuffer[0] = 0
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        func add(_ line: String) { headers = curl_slist_append(headers, line) }
        add("Expect:")
        if let token = settings.token { add("Authorization: Bearer \(token)") }
        for line in request.headers { add(line) }
        switch request.sink {
        case .file: if resumeAt > 0 { add("Range: bytes=\(resumeAt)-") }
        case .range(_, let range): add("Range: bytes=\(resumeAt)-\(range.upperBound - 1)")
        case .memory: break
        }

        let context = Unmanaged.passUnretained(transfer).toOpaque()
        var setup = CURLE_OK
        func set(_ code: CURLcode) { if setup == CURLE_OK { setup = code } }
        set(fp_curl_setopt_string(handle, CURLOPT_URL, url))
        set(fp_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(fp_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        set(fp_curl_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1))
        set(fp_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(settings.connectTimeout * 1000)))
        set(fp_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1))
        set(fp_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, max(1, Int(settings.stallTimeout.rounded(.up)))))
        set(fp_curl_setopt_long(handle, CURLOPT_BUFFERSIZE, 512 * 1024))
        set(fp_curl_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, 512 * 1024))
        set(fp_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        if let caFile = settings.caFile { set(fp_curl_setopt_string(handle, CURLOPT_CAINFO, caFile)) }
        set(fp_curl_setopt_callback(handle, CURLOPT_HEADERFUNCTION, headerCallback))
        set(fp_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context))
        set(fp_curl_setopt_callback(handle, CURLOPT_WRITEFUNCTION, writeCallback))
        set(fp_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
        set(fp_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0))
        set(fp_curl_setopt_xferinfo(handle, progressCallback))
        set(fp_curl_setopt_pointer(handle, CURLOPT_XFERINFODATA, context))
        switch request.body {
        case .none:
            if request.method == "POST" {
                set(fp_curl_setopt_long(handle, CURLOPT_POST, 1))
                set(fp_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, 0))
            } else if request.method != "GET" {
                set(fp_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method))
            }
        case .form(let fields):
            let text = fields.map {
                "\(HTTPClient.percentEncode($0.0, keepSlash: false))=\(HTTPClient.percentEncode($0.1, keepSlash: false))"
            }
            .joined(separator: "&")
            add("Content-Type: application/x-www-form-urlencoded")
            set(fp_curl_setopt_long(handle, CURLOPT_POST, 1))
            set(fp_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, text.utf8.count))
            set(fp_curl_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, text))
        case .file(_, let size):
            add("Content-Type: application/octet-stream")
            set(fp_curl_setopt_long(handle, CURLOPT_POST, 1))
            set(fp_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(size)))
            set(fp_curl_setopt_callback(handle, CURLOPT_READFUNCTION, readCallback))
            set(fp_curl_setopt_pointer(handle, CURLOPT_READDATA, context))
        }
        set(fp_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headers))
        if setup != CURLE_OK {
            return .failure(
                FileProviderError(.invalidArgument, "libcurl refused an option: \(String(cString: curl_easy_strerror(setup)))"),
                retryable: false, stored: resumeAt)
        }

        transfer.stallTimeout = settings.stallTimeout
        var code = curl_easy_perform(handle)
        transfer.flush()
        let stored = transfer.storedLength
        if let failure = transfer.failure { return .failure(failure, retryable: false, stored: stored) }
        if code == CURLE_ABORTED_BY_CALLBACK && transfer.stalled {
            let seconds = settings.stallTimeout.formatted(.number.precision(.fractionLength(0...1)))
            return .failure(
                FileProviderError(.serverUnreachable, "\(request.method) \(url): no byte moved for \(seconds) s"), retryable: true,
                stored: stored)
        }
        // A range sink ends the transfer itself once the range is written (the server sent more).
        if code == CURLE_WRITE_ERROR && transfer.rangeIsComplete { code = CURLE_OK }
        if code != CURLE_OK {
            let detail = errorBuffer[0] != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
            let (error, retryable) = Self.error(for: code, detail: detail, what: "\(request.method) \(url)")
            return .failure(error, retryable: retryable, stored: stored)
        }
        var status = 0
        _ = fp_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        if transfer.head.status == 0 { transfer.head.status = status }
        if let error = transfer.finish() {
            return .failure(error, retryable: error.code == .serverUnreachable, stored: transfer.storedLength)
        }
        return .reply(transfer.head, transfer.body, transfer.storedLength)
    }

    /// The error a CURLcode means, and whether another attempt may work.
    static func error(for code: CURLcode, detail: String, what: String) -> (FileProviderError, Bool) {
        let text = "\(what): \(detail)"
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT,
            CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_SSL_CONNECT_ERROR,
            CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3:
            return (FileProviderError(.serverUnreachable, text), true)
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return (
                FileProviderError(
                    .notAuthenticated, "\(text); the server's certificate is not trusted (give its CA with --ca-file)"),
                false
            )
        case CURLE_ABORTED_BY_CALLBACK:
            return (FileProviderError(.cancelled, "cancelled"), false)
        case CURLE_WRITE_ERROR:
            return (FileProviderError(.localIOFailure, "\(text): the download could not be stored"), false)
        case CURLE_READ_ERROR:
            return (FileProviderError(.localIOFailure, "\(text): the file to upload could not be read"), false)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return (FileProviderError(.invalidArgument, "\(text); check --url"), false)
        default:
            return (FileProviderError(.serverUnreachable, text), true)
        }
    }
}

/// The state of one attempt, reached from libcurl's callbacks through their user data pointer.
/// Used only on the connection's thread.
final class Transfer {
    let request: HTTPRequest
    let resumeAt: Int64
    let cancellation: CancellationFlag
    var head = ReplyHead(status: 0, headers: [:])
    var body = Data()
    var failure: FileProviderError?
    private var headStarted = false
    private var accepted = false
    private var sinkFile: Int32 = -1
    private var pending: [UInt8] = []
    private var uploadFile: Int32 = -1
    /// For a file sink, the length of the file written so far; for a range sink, the offset of
    /// the next byte to write.
    private(set) var storedLength: Int64
    private var total: Int64?
    /// Body bytes to drop before the range starts (a `200` to a ranged request).
    private var skip: Int64 = 0
    /// Where a range sink stops writing.
    private var rangeEnd: Int64 = .max
    /// A range sink got a byte past its range, so it ended the transfer itself: not a failure.
    private(set) var rangeIsComplete = false

    init(request: HTTPRequest, resumeAt: Int64, cancellation: CancellationFlag) {
        self.request = request
        self.resumeAt = resumeAt
        self.cancellation = cancellation
        storedLength = resumeAt
    }

    func openFiles() -> FileProviderError? {
        switch request.sink {
        case .file(let path, _):
            pending.reserveCapacity(Self.blockSize + 64 * 1024)
            sinkFile = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            if sinkFile < 0 { return POSIXError.localWriteError("open", path: path) }
        case .range(let path, let range):
            pending.reserveCapacity(Int(min(Int64(Self.blockSize + 64 * 1024), Int64(range.count))))
            // The engine's existing file: never created or truncated here.
            sinkFile = open(path, O_WRONLY | O_CLOEXEC)
            if sinkFile < 0 { return POSIXError.localWriteError("open", path: path) }
        case .memory:
            break
        }
        if case .file(let path, _) = request.body {
            uploadFile = open(path, O_RDONLY | O_CLOEXEC)
            if uploadFile < 0 {
                let error = POSIXError.error("open", path: path)
                return FileProviderError(error.code == .noSuchItem ? .localIOFailure : error.code, error.message)
            }
        }
        return nil
    }

    func closeFiles() {
        if sinkFile >= 0 { close(sinkFile) }
        if uploadFile >= 0 { close(uploadFile) }
        sinkFile = -1
        uploadFile = -1
    }

    /// A header line: a status line starts a new head (after `100 Continue`).
    func header(_ bytes: UnsafeRawBufferPointer) {
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            head = ReplyHead(status: parts.count > 1 ? Int(parts[1]) ?? 0 : 0, headers: [:])
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        head.headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }

    private var isSuccess: Bool { (200..<300).contains(head.status) }

    /// Prepares the sink for a successful reply, once: checks the head and positions the file.
    private func accept() -> Bool {
        if accepted { return true }
        accepted = true
        guard isSuccess else { return true }
        do throws(FileProviderError) {
            try request.validate?(head)
        } catch {
            failure = error
            return false
        }
        guard sinkFile >= 0 else { return true }
        if case .range(_, let range) = request.sink {
            if head.status == 206 {
                guard head.rangeStart == resumeAt else {
                    failure = FileProviderError(
                        .corruptData,
                        "the server answered a request for bytes from \(resumeAt) with the range \(head["content-range"]?.prefix(80).debugDescription ?? "none")"
                    )
                    return false
                }
            } else {
                // The whole resource from its first byte: drop what comes before the range.
                skip = resumeAt
            }
            rangeEnd = range.upperBound
            storedLength = resumeAt
            total = try? head.resourceSize(of: "")
            return true
        }
        var start: Int64 = 0
        if head.status == 206 {
            guard head.rangeStart == resumeAt else {
                failure = FileProviderError(.corruptData, "the server resumed at another byte than \(resumeAt)")
                return false
            }
            start = resumeAt
        }
        if ftruncate(sinkFile, off_t(start)) != 0 || lseek(sinkFile, off_t(start), SEEK_SET) < 0 {
            failure = POSIXError.localWriteError("truncate", path: "the download file")
            return false
        }
        storedLength = start
        // An impossible size fails `validate` above for downloads of items; here it only
        // means no total for progress.
        total = try? head.resourceSize(of: "")
        request.progress?(storedLength, total)
        return true
    }

    /// Body bytes; returns how many were taken (fewer aborts the transfer).
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        if cancellation.isCancelled {
            failure = FileProviderError(.cancelled, "cancelled")
            return 0
        }
        guard accept() else { return 0 }
        if !isSuccess {
            if body.count < 64 * 1024 { body.append(contentsOf: bytes.prefix(64 * 1024 - body.count)) }
            return bytes.count
        }
        switch request.sink {
        case .memory(let limit):
            guard body.count + bytes.count <= limit else {
                failure = FileProviderError(.corruptData, "the reply is larger than \(limit) bytes")
                return 0
            }
            body.append(contentsOf: bytes)
        case .file:
            // libcurl hands over at most 16 KiB at a time; write in 1 MiB blocks.
            pending.append(contentsOf: bytes)
            if pending.count >= Self.blockSize && !flush() { return 0 }
        case .range:
            var start = 0
            if skip > 0 {
                start = Int(min(skip, Int64(bytes.count)))
                skip -= Int64(start)
            }
            let room = max(0, rangeEnd - storedLength - Int64(pending.count))
            let take = Int(min(Int64(bytes.count - start), room))
            if take > 0 { pending.append(contentsOf: bytes[start..<(start + take)]) }
            if pending.count >= Self.blockSize && !flush() { return 0 }
            if start + take < bytes.count {
                // Bytes past the range: never written; the transfer ends here.
                rangeIsComplete = true
                return 0
            }
        }
        return bytes.count
    }

    static let blockSize = 1 << 20

    /// Writes the buffered body bytes to the sink file; false (with `failure` set) when it
    /// cannot.
    @discardableResult
    func flush() -> Bool {
        guard !pending.isEmpty, sinkFile >= 0 else { return true }
        defer { pending.removeAll(keepingCapacity: true) }
        let ok = pending.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                // At the stored length: the end of a file sink (positioned there), the next
                // offset of a range sink.
                let count = pwrite(sinkFile, raw.baseAddress! + offset, raw.count - offset, off_t(storedLength) + off_t(offset))
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += count
            }
            return true
        }
        guard ok else {
            failure = POSIXError.localWriteError("write", path: "the download file")
            return false
        }
        storedLength += Int64(pending.count)
        request.progress?(storedLength, total)
        return true
    }

    /// Body bytes to upload; returns how many were written into `buffer`.
    func send(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        if cancellation.isCancelled {
            failure = FileProviderError(.cancelled, "cancelled")
            return fp_curl_read_abort()
        }
        while true {
            let count = read(uploadFile, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno == EINTR { continue }
            failure = FileProviderError(.localIOFailure, "the file to upload could not be read: \(String(cString: strerror(errno)))")
            return fp_curl_read_abort()
        }
    }

    /// After a complete reply: checks an empty success body and that a file holds the whole
    /// resource.
    func finish() -> FileProviderError? {
        guard accept() else { return failure }
        guard isSuccess, sinkFile >= 0 else { return nil }
        if case .range(_, let range) = request.sink {
            // A complete reply (or one this sink ended past the range) must hold the range up to
            // the end of the resource.
            guard let total else {
                return FileProviderError(.corruptData, "the reply to a ranged request gave no size")
            }
            let expected = max(resumeAt, min(range.upperBound, total))
            if storedLength != expected {
                return FileProviderError(
                    .corruptData,
                    "the reply held \(storedLength - resumeAt) of the \(expected - resumeAt) bytes from \(resumeAt) it had to")
            }
            return nil
        }
        if let total, storedLength != total {
            return FileProviderError(
                .serverUnreachable, "the reply ended after \(storedLength) of \(total) bytes")
        }
        return nil
    }

    var isCancelled: Bool { cancellation.isCancelled }

    /// Seconds without a byte moving, either way, before the transfer is given up
    /// (``ClientSettings/stallTimeout``). libcurl's own low-speed limit judges a speed averaged
    /// over the last seconds, so a transfer that stalled after a burst went on for about five
    /// seconds more than asked.
    var stallTimeout: Double = .infinity
    private var moved: Int64 = -1
    private var movedAt: UInt64 = 0
    /// The transfer was stopped because no byte moved for ``stallTimeout`` seconds.
    private(set) var stalled = false

    /// libcurl's progress callback (at least once a second): whether to stop, because the
    /// transfer was cancelled or nothing moved for ``stallTimeout`` seconds.
    func shouldStop(downloaded: Int64, uploaded: Int64) -> Bool {
        if isCancelled { return true }
        let now = DispatchTime.now().uptimeNanoseconds
        let total = downloaded &+ uploaded
        if total != moved {
            moved = total
            movedAt = now
            return false
        }
        if Double(now &- movedAt) / 1e9 >= stallTimeout {
            stalled = true
            return true
        }
        return false
    }
}

private let headerCallback: fp_curl_data_callback = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    transfer.header(UnsafeRawBufferPointer(start: buffer, count: size * count))
    return size * count
}

private let writeCallback: fp_curl_data_callback = { buffer, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receive(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

private let readCallback: fp_curl_data_callback = { buffer, size, count, context in
    guard let context else { return fp_curl_read_abort() }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.send(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

private let progressCallback: fp_curl_xferinfo_callback = { context, _, downloaded, _, uploaded in
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.shouldStop(downloaded: Int64(downloaded), uploaded: Int64(uploaded)) ? 1 : 0
}
