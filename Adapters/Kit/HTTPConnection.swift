import CCurl
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// One keep-alive connection: a curl easy handle used only on its own thread. Builds each
/// request's options on the handle and runs it.
final class HTTPConnection: @unchecked Sendable {
    let executor: BlockingExecutor
    private let handle: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init?(name: String) {
        guard let handle = fp_curl_easy_init() else { return nil }
        self.handle = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        executor = BlockingExecutor(name: name, threads: 1)
    }

    deinit {
        fp_curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// Runs one attempt on the calling thread (the connection's own).
    func perform(
        _ request: HTTPRequest, url: String, settings: ClientSettings, resumeAt: Int64, cancellation: CancellationFlag,
        sinks: TransferSinks = TransferSinks()
    ) -> Attempt {
        let transfer = HTTPTransfer(request: request, resumeAt: resumeAt, cancellation: cancellation)
        transfer.sinks = sinks
        defer { transfer.closeFiles() }
        if let error = transfer.openFiles() { return .failure(error, retryable: false, stored: resumeAt) }

        fp_curl_easy_reset(handle)  // keeps the live connection for keep-alive
        errorBuffer[0] = 0
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { fp_curl_slist_free_all(headers) }
        // A small upload's body, read before the request (libcurl reads it during the transfer).
        var smallBody: UnsafeMutableRawBufferPointer?
        defer { smallBody?.deallocate() }
        func add(_ line: String) { headers = fp_curl_slist_append(headers, line) }
        // libcurl 7.88 signs an `Expect:` line (which only removes the header) as a header it
        // never sends: AWS-signed requests keep libcurl's own `Expect: 100-continue`.
        if settings.awsSignature == nil { add("Expect:") }
        if let token = settings.token { add("Authorization: Bearer \(token)") }
        for line in request.headers { add(line) }
        switch request.sink {
        case .file: if resumeAt > 0 { add("Range: bytes=\(resumeAt)-") }
        case .spool: break
        case .range(_, let range): add("Range: bytes=\(resumeAt)-\(range.upperBound - 1)")
        case .firstRange(_, let range):
            // Past the range (an earlier attempt got the whole file with `200`): the rest of it.
            add(resumeAt < range.upperBound ? "Range: bytes=\(resumeAt)-\(range.upperBound - 1)" : "Range: bytes=\(resumeAt)-")
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
        // libcurl 7.88 allocates both buffers for every transfer and frees them after it: at 512
        // KiB each was a `mmap` and a `munmap` per request (glibc maps large blocks), 5% of the
        // CPU of a download of 4 KiB files. The download buffer stays under glibc's mapping
        // threshold (128 KiB; the body goes to the sink in 1 MiB blocks anyway); the upload
        // buffer is as large as the body, up to 512 KiB.
        set(fp_curl_setopt_long(handle, CURLOPT_BUFFERSIZE, Self.downloadBufferSize))
        set(fp_curl_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, Self.uploadBufferSize(for: request.body)))
        set(fp_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        if let caFile = settings.caFile { set(fp_curl_setopt_string(handle, CURLOPT_CAINFO, caFile)) }
        // Certificates and host names are always verified (libcurl's defaults, set anyway).
        set(fp_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
        set(fp_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
        if let signature = settings.awsSignature {
            var signed = request.headers
            if let token = signature.sessionToken { signed.append("x-amz-security-token: \(token)") }
            // A body streamed from a file is not hashed (libcurl would have to read it first). A body
            // in memory is: libcurl 7.88 signs its hash but sends no `x-amz-content-sha256`, and a
            // store then checks the signature against the hash of an empty body (SeaweedFS).
            let payloadHash: String?
            switch request.body {
            case .file, .filePart: payloadHash = "UNSIGNED-PAYLOAD"
            case .data(let data, _): payloadHash = AWSSignature.payloadHash(data)
            case .none: payloadHash = AWSSignature.payloadHash(Data())
            case .form: payloadHash = nil
            }
            if let payloadHash { signed.append("x-amz-content-sha256: \(payloadHash)") }
            for line in signed.dropFirst(request.headers.count) { add(line) }
            if AWSRequestSigner.libcurlMisorders(signed), let payloadHash,
                let lines = AWSRequestSigner(signature: signature).headers(
                    method: request.method, url: url, lines: signed, payloadHash: payloadHash)
            {
                for line in lines { add(line) }
            } else {
                set(fp_curl_setopt_string(handle, CURLOPT_AWS_SIGV4, signature.provider))
                set(fp_curl_setopt_string(handle, CURLOPT_USERNAME, signature.accessKey))
                set(fp_curl_setopt_string(handle, CURLOPT_PASSWORD, signature.secretKey))
            }
        } else if let credentials = settings.basicCredentials {
            set(fp_curl_setopt_long(handle, CURLOPT_HTTPAUTH, Int(fp_curl_auth_basic())))
            set(fp_curl_setopt_string(handle, CURLOPT_USERNAME, credentials.user))
            set(fp_curl_setopt_string(handle, CURLOPT_PASSWORD, credentials.password))
        } else if let netrcFile = settings.netrcFile {
            set(fp_curl_setopt_long(handle, CURLOPT_NETRC, Int(CURL_NETRC_REQUIRED.rawValue)))
            set(fp_curl_setopt_string(handle, CURLOPT_NETRC_FILE, netrcFile))
        }
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
            } else if request.method == "HEAD" {
                set(fp_curl_setopt_long(handle, CURLOPT_NOBODY, 1))
            } else if request.method != "GET" {
                set(fp_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method))
            }
        case .data(let data, let contentType):
            add("Content-Type: \(contentType)")
            set(fp_curl_setopt_long(handle, CURLOPT_POST, 1))
            set(fp_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, data.count))
            if data.isEmpty {
                set(fp_curl_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, ""))
            } else {
                set(data.withUnsafeBytes { fp_curl_setopt_copy_bytes(handle, $0.baseAddress, $0.count) })
            }
            if request.method != "POST" { set(fp_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method)) }
        case .form(let fields):
            let text = fields.map {
                "\(HTTPClient.percentEncode($0.0, keepSlash: false))=\(HTTPClient.percentEncode($0.1, keepSlash: false))"
            }
            .joined(separator: "&")
            add("Content-Type: application/x-www-form-urlencoded")
            set(fp_curl_setopt_long(handle, CURLOPT_POST, 1))
            set(fp_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, text.utf8.count))
            set(fp_curl_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, text))
        case .file(_, let size) where request.method == "PUT" && size > 0 && size < Self.sentWithHead && settings.awsSignature == nil:
            // A small file goes in memory (`POSTFIELDS`, the method still `PUT`): libcurl then
            // sends it in the same `send` as the request's head, where a body it reads from the
            // file goes in a second one. One system call and one TCP segment fewer a file on
            // both sides (the server reads it with the head). Not AWS-signed requests: libcurl
            // 7.88 would sign a hash of the body instead of their `UNSIGNED-PAYLOAD`.
            add("Content-Type: application/octet-stream")
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(size), alignment: 1)
            smallBody = buffer
            guard transfer.readWholeUpload(into: buffer) else {
                return .failure(
                    transfer.failure ?? FileProviderError(.localIOFailure, "the file to upload could not be read"), retryable: false,
                    stored: resumeAt)
            }
            set(fp_curl_setopt_long(handle, CURLOPT_POST, 1))
            set(fp_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(size)))
            set(fp_curl_setopt_pointer(handle, CURLOPT_POSTFIELDS, buffer.baseAddress))
            set(fp_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method))
        case .file(_, let size), .filePart(_, _, let size):
            add("Content-Type: application/octet-stream")
            if request.method == "PUT" {
                set(fp_curl_setopt_long(handle, CURLOPT_UPLOAD, 1))
                set(fp_curl_setopt_off(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(size)))
            } else {
                set(fp_curl_setopt_long(handle, CURLOPT_POST, 1))
                set(fp_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(size)))
                if request.method != "POST" { set(fp_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method)) }
            }
            set(fp_curl_setopt_callback(handle, CURLOPT_READFUNCTION, readCallback))
            set(fp_curl_setopt_pointer(handle, CURLOPT_READDATA, context))
        }
        set(fp_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headers))
        if setup != CURLE_OK {
            return .failure(
                FileProviderError(.invalidArgument, "libcurl refused an option: \(String(cString: fp_curl_easy_strerror(setup)))"),
                retryable: false, stored: resumeAt)
        }

        transfer.stallTimeout = settings.stallTimeout
        var code = fp_curl_easy_perform(handle)
        transfer.flush()
        let stored = transfer.storedLength
        if let failure = transfer.failure { return .failure(failure, retryable: false, stored: stored) }
        if code == CURLE_ABORTED_BY_CALLBACK && transfer.stalled {
            let seconds = settings.stallTimeout.formatted(.number.precision(.fractionLength(0...1)))
            return .failure(
                FileProviderError(.serverUnreachable, "\(request.method) \(LogRedaction.url(url)): no byte moved for \(seconds) s"),
                retryable: true,
                stored: stored)
        }
        // A range sink ends the transfer itself once the range is written (the server sent more).
        if code == CURLE_WRITE_ERROR && transfer.rangeIsComplete { code = CURLE_OK }
        if code != CURLE_OK {
            let detail = errorBuffer[0] != 0 ? String(cString: errorBuffer) : String(cString: fp_curl_easy_strerror(code))
            let (error, retryable) = Self.error(for: code, detail: detail, what: "\(request.method) \(LogRedaction.url(url))")
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

    /// Files smaller than this are uploaded from memory, in one `send` with the request's head
    /// (libcurl 7.88 adds a body to the head below 64 KiB, its `MAX_INITIAL_POST_SIZE`).
    static let sentWithHead: Int64 = 64 * 1024

    /// libcurl's receive buffer.
    static let downloadBufferSize = 64 * 1024

    /// libcurl's send buffer for a body: its size, at least libcurl's default (16 KiB) and at
    /// most 512 KiB.
    static func uploadBufferSize(for body: RequestBody) -> Int {
        let length: Int64
        switch body {
        case .file(_, let size), .filePart(_, _, let size): length = size
        case .none, .data, .form: length = 0
        }
        return Int(min(512 * 1024, max(16 * 1024, length)))
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
