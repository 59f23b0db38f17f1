import CCurl
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

// Every libcurl call of the adapters is in this kit: HTTPClient (retries, the pool of
// connections), HTTPConnection (one easy handle: building a request) and HTTPTransfer (one
// attempt's callbacks and sinks). An adapter sends an `HTTPRequest` and gets an `HTTPReply` or
// a `FileProviderError`; it never sees a CURL handle, a CURLcode or a raw status it has not
// asked for.

/// How the client connects.
public struct ClientSettings: Sendable {
    /// The base URL without a trailing slash: `http://127.0.0.1:8080` or `https://host/api`.
    public var baseURL: String
    /// A bearer token for `Authorization`, or `nil`.
    public var token: String?
    /// A user name and password for HTTP Basic authentication, or `nil`.
    public var basicCredentials: (user: String, password: String)?
    /// Signs every request with AWS Signature Version 4 (S3), or `nil`; takes the place of
    /// `basicCredentials` and `netrcFile`.
    public var awsSignature: AWSSignature?
    /// A netrc file libcurl takes the credentials for the host from, or `nil`.
    public var netrcFile: String?
    /// A CA bundle for HTTPS, or `nil` for the system's.
    public var caFile: String?
    public var connectTimeout: Double = 10
    /// Seconds without any byte moving before a transfer is abandoned.
    public var stallTimeout: Double = 30
    public var connections: Int = 4
    /// Retries after the first attempt, for connection errors, 429 and 5xx.
    public var retries: Int = 4
    /// The first backoff delay in seconds; doubled on each retry, with jitter.
    public var backoff: Double = 0.2
    /// The longest wait between attempts, in seconds, also for `Retry-After`.
    public var maximumDelay: Double = 30
    /// Said in the message of a `401`/`403` reply: which option gives the credentials.
    public var authenticationHint = "check the credentials"
    /// The name of the connection threads.
    public var threadName = "http"

    public init(
        baseURL: String, token: String? = nil, caFile: String? = nil, connectTimeout: Double = 10, stallTimeout: Double = 30,
        connections: Int = 4, retries: Int = 4
    ) {
        self.baseURL = baseURL
        self.token = token
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
        self.connections = connections
        self.retries = retries
    }
}

/// An HTTP/1.1 client on libcurl: a pool of connections, each a reused easy handle (keep-alive)
/// on a thread of its own, never on Swift's cooperative pool.
public final class HTTPClient: Sendable {
    public let settings: ClientSettings
    let pool: SessionPool<HTTPConnection>
    /// Holds every request back after a `429` or `503`.
    let pacer = Pacer()

    /// The version of the libcurl this process loaded and its TLS library, from `curl_version()`
    /// (`libcurl/8.5.0 OpenSSL/3.0.13 zlib/…`): `8.5.0 (OpenSSL/3.0.13)`; `unknown` when it says
    /// nothing usable.
    public static var libraryVersion: String {
        if let failure = fp_curl_load_error() { return "not loaded: \(String(cString: failure))" }
        guard let text = fp_curl_version().map({ String(cString: $0) }) else { return "unknown" }
        let words = text.split(separator: " ")
        guard let first = words.first, first.hasPrefix("libcurl/") else { return "unknown" }
        let version = String(first.dropFirst("libcurl/".count))
        let tls = words.dropFirst().first { word in
            ["OpenSSL/", "GnuTLS/", "mbedTLS/", "wolfSSL/", "BoringSSL", "LibreSSL/", "rustls"].contains { word.hasPrefix($0) }
        }
        return tls.map { "\(version) (\($0))" } ?? version
    }

    /// - Throws: `invalidArgument` when a number in `settings` is out of the range
    ///   ``HTTPOptions/check()`` allows, or libcurl cannot be loaded (`libcurl.so.4`, or the file
    ///   `$FILEPROVIDER_LIBCURL` names) or set up.
    public init(settings: ClientSettings) throws(FileProviderError) {
        try HTTPOptions(
            connectTimeout: settings.connectTimeout, timeout: settings.stallTimeout, connections: settings.connections,
            retries: settings.retries
        ).check()
        if let failure = fp_curl_load_error() {
            throw FileProviderError(
                .invalidArgument,
                "libcurl cannot be loaded (\(String(cString: failure))): the HTTP stores (WebDAV, S3, media) need it; install libcurl4 (apt-get install libcurl4)"
            )
        }
        self.settings = settings
        var connections: [HTTPConnection] = []
        for index in 0..<settings.connections {
            guard let connection = HTTPConnection(name: "\(settings.threadName)-\(index)") else {
                throw FileProviderError(.invalidArgument, "libcurl could not make a connection handle")
            }
            connections.append(connection)
        }
        pool = SessionPool(connections)
    }

    /// Stops the connection threads once their work is done.
    public func close() { pool.sessions.forEach { $0.executor.shutDown() } }

    /// Sends a request, retrying connection errors, 429 and 5xx with exponential backoff and
    /// jitter (honouring `Retry-After`), at most `settings.retries` times. After a `429` or `503`
    /// every other request of the client waits out the same delay before its next attempt
    /// (`Pacer`). A download into a file resumes with `Range` after what earlier attempts
    /// stored.
    ///
    /// Returns the reply of the last attempt whatever its status; call ``HTTPReply/check()``.
    /// - Throws: `serverUnreachable` when the server cannot be reached, a transfer stalls or
    ///   breaks off on the last attempt; `notAuthenticated` when the server's certificate is
    ///   not trusted; `localIOFailure` when the sink or the body file fails; `cancelled` when
    ///   `cancellation` is set; what `request.validate` throws; `corruptData` when a memory
    ///   reply is over its limit or a resumed reply does not start where asked.
    public func send(_ request: HTTPRequest, cancellation: CancellationFlag) async throws(FileProviderError) -> HTTPReply {
        try await send(request, then: nil, cancellation: cancellation).reply
    }

    /// Sends `request` as ``send(_:cancellation:)`` does and, when its reply is a success
    /// (2xx), `next` right after on the same connection, in the same job on its thread: no
    /// second wait for a connection and no second hand-off between threads (an upload and the
    /// `HEAD` that reads what the server kept, 10,000 times for 10,000 files). `next` must keep
    /// its reply in memory and send no file.
    ///
    /// Returns the reply to `request` and the reply to `next`; `nil` for `next` when it was not
    /// sent (the first reply was no success, or cancelled), or when it needs what a request
    /// sent alone gets (its connection failed, or it was answered `429` or `5xx`): then send it
    /// with ``send(_:cancellation:)``, which retries.
    /// - Throws: what ``send(_:cancellation:)`` throws for `request`.
    public func send(_ request: HTTPRequest, then next: HTTPRequest, cancellation: CancellationFlag)
        async throws(FileProviderError) -> (reply: HTTPReply, next: HTTPReply?)
    {
        precondition(next.sink.isMemory && !next.body.isFile, "a request sent after another keeps its reply in memory and sends no file")
        return try await send(request, then: .some(next), cancellation: cancellation)
    }

    private func send(_ request: HTTPRequest, then next: HTTPRequest?, cancellation: CancellationFlag)
        async throws(FileProviderError) -> (reply: HTTPReply, next: HTTPReply?)
    {
        let url = settings.baseURL + request.endpoint + Self.encodeQuery(request.query)
        let nextURL = next.map { settings.baseURL + $0.endpoint + Self.encodeQuery($0.query) }
        let what = "\(request.method) \(request.endpoint)"
        var resumeAt = request.sink.resumeOffset
        let transferSinks = TransferSinks(for: request)
        var attempt = 0
        while true {
            attempt += 1
            if cancellation.isCancelled || Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
            // A hold may begin while this request waits for a connection: it then gives the
            // connection back and waits too.
            var acquired: HTTPConnection
            while true {
                await pacer.wait()
                acquired = await pool.acquire()
                if !pacer.isHolding { break }
                pool.release(acquired)
                if cancellation.isCancelled || Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
            }
            let connection = acquired
            let settings = self.settings
            let start = resumeAt
            let outcome: Attempt
            var following: (outcome: Attempt, seconds: Double)?
            let started = DispatchTime.now().uptimeNanoseconds
            do {
                (outcome, following) = try await connection.executor.run { () -> (Attempt, (Attempt, Double)?) in
                    let outcome = connection.perform(
                        request, url: url, settings: settings, resumeAt: start, cancellation: cancellation, sinks: transferSinks)
                    guard let next, let nextURL, case .reply(let head, _, _) = outcome, (200...299).contains(head.status),
                        !cancellation.isCancelled
                    else { return (outcome, nil) }
                    let nextStarted = DispatchTime.now().uptimeNanoseconds
                    let following = connection.perform(
                        next, url: nextURL, settings: settings, resumeAt: 0, cancellation: cancellation, sinks: TransferSinks())
                    return (outcome, (following, RequestLogText.seconds(since: nextStarted)))
                }
            } catch {
                pool.release(connection)
                throw error
            }
            // The server is overloaded: every request waits, from before the connection goes back.
            var overloadDelay: Double?
            if case .reply(let head, _, _) = outcome, head.status == 429 || head.status == 503 {
                let delay = backoffDelay(attempt: attempt, retryAfter: head["retry-after"])
                pacer.hold(seconds: delay)
                overloadDelay = delay
            }
            // The reply to `next`, unless it needs a retry (sent again alone, by the caller).
            var nextReply: HTTPReply?
            if let next, let nextURL, let following {
                nextReply = finalReply(following.outcome, of: next, url: nextURL, seconds: following.seconds)
            }
            pool.release(connection)
            HTTPRequestLog.log(
                request, url: url, settings: settings, outcome: outcome,
                seconds: RequestLogText.seconds(since: started), attempt: attempt)
            let retriesLeft = attempt <= settings.retries
            switch outcome {
            case .reply(let head, let body, let length):
                var reply = HTTPReply(head: head, body: body, fileLength: length, attempts: attempt, what: what)
                reply.authenticationHint = settings.authenticationHint
                if Self.isRetryable(head.status) && retriesLeft && !request.finalStatuses.contains(head.status) {
                    await pause(seconds: overloadDelay ?? backoffDelay(attempt: attempt, retryAfter: head["retry-after"]))
                    continue
                }
                return (reply, nextReply)
            case .failure(let error, let retryable, let stored):
                switch request.sink {
                case .file, .range, .firstRange: if stored > resumeAt { resumeAt = stored }
                case .memory, .spool: break
                }
                if retryable && retriesLeft {
                    await pause(seconds: backoffDelay(attempt: attempt, retryAfter: nil))
                    continue
                }
                var final = error
                if retryable { final.message += " (after \(attempt) attempt\(attempt == 1 ? "" : "s"))" }
                throw final
            }
        }
    }

    /// Whether a reply with `status` is sent again (after a pause): `429` and `5xx` but `507`
    /// (insufficient storage, which waiting does not cure).
    static func isRetryable(_ status: Int) -> Bool {
        status == 429 || (500...599).contains(status) && status != 507
    }

    /// The wait before the next attempt: `Retry-After` when the server gave one, else an
    /// exponential backoff with jitter; never longer than `maximumDelay`.
    func backoffDelay(attempt: Int, retryAfter: String?) -> Double {
        var delay = settings.backoff * pow(2, Double(attempt - 1))
        delay *= Double.random(in: 0.5...1.5)
        if let retryAfter, let seconds = Self.retryAfterSeconds(retryAfter) { delay = max(delay, seconds) }
        return min(delay, settings.maximumDelay)
    }

    /// Waits before the next attempt.
    private func pause(seconds: Double) async { try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9)) }

    /// `Retry-After` as seconds: a number or an HTTP date.
    public static func retryAfterSeconds(_ value: String) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(text) { return max(0, seconds) }
        if let date = HTTPDate.rfc1123(text[...]) { return max(0, date.timeIntervalSinceNow) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text).map { max(0, $0.timeIntervalSinceNow) }
    }

    /// `?a=b&c=d` with everything but unreserved characters and `/` percent-encoded (a space is
    /// `%20`, a `+` is `%2B`).
    public static func encodeQuery(_ fields: [(String, String)]) -> String {
        if fields.isEmpty { return "" }
        return "?" + fields.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    public static func percentEncode(_ text: String, keepSlash: Bool = true) -> String {
        String(unsafeUninitializedCapacity: text.utf8.count * 3) { out in
            var count = 0
            appendEncoded(text, keepSlash: keepSlash, to: out, at: &count)
            return count
        }
    }

    /// `names` percent-encoded (as ``percentEncode(_:keepSlash:)``, a `/` in a name too) and
    /// joined with `/`, in one pass into one string: the URL path of every request comes here.
    public static func percentEncodedPath(_ names: [String]) -> String {
        var capacity = max(0, names.count - 1)
        for name in names { capacity += name.utf8.count * 3 }
        return String(unsafeUninitializedCapacity: capacity) { out in
            var count = 0
            for (index, name) in names.enumerated() {
                if index > 0 {
                    out[count] = UInt8(ascii: "/")
                    count += 1
                }
                appendEncoded(name, keepSlash: false, to: out, at: &count)
            }
            return count
        }
    }

    /// Writes `text` percent-encoded into `out` from `count` on (room for three bytes a byte).
    private static func appendEncoded(_ text: String, keepSlash: Bool, to out: UnsafeMutableBufferPointer<UInt8>, at count: inout Int) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out[count] = byte
                count += 1
            case UInt8(ascii: "/") where keepSlash:
                out[count] = byte
                count += 1
            default:
                out[count] = UInt8(ascii: "%")
                out[count + 1] = hexDigit(byte >> 4)
                out[count + 2] = hexDigit(byte & 0x0F)
                count += 3
            }
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
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
