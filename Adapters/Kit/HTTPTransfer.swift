import CCurl
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The engine's sinks (``ContentSink``) for the bytes of a request's files: those written into
/// a `.file` reply sink, those read from a `.file` or `.filePart` body, each at its offset in
/// its file.
struct TransferSinks: Sendable {
    var download: ContentSink?
    var upload: ContentSink?

    init() {}

    /// The engine's sinks for the file `request` downloads into and the file it uploads from
    /// (``ContentSink``), taken in the calling task: task-local values do not reach the
    /// connection's thread.
    init(for request: HTTPRequest) {
        switch request.sink {
        case .file(let path, _), .range(let path, _), .firstRange(let path, _): download = ContentSink.for(path: path)
        case .memory, .spool: break
        }
        switch request.body {
        case .file(let path, _), .filePart(let path, _, _): upload = ContentSink.for(path: path)
        case .none, .form, .data: break
        }
    }
}

/// The state of one attempt, reached from libcurl's callbacks through their user data pointer.
/// Used only on the connection's thread.
final class HTTPTransfer {
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
    /// Where the next upload byte is read (`pread`) for a file part; -1 reads a whole file in
    /// order.
    private var uploadOffset: Int64 = -1
    /// Upload bytes still to send.
    private var uploadLeft: Int64 = .max
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
    /// Where the bytes written and read also go.
    var sinks = TransferSinks()
    /// Where the next byte of a whole-file body is read (its reads are sequential).
    private var uploadPosition: Int64 = 0

    init(request: HTTPRequest, resumeAt: Int64, cancellation: CancellationFlag) {
        self.request = request
        self.resumeAt = resumeAt
        self.cancellation = cancellation
        storedLength = resumeAt
    }

    func openFiles() -> FileProviderError? {
        switch request.sink {
        case .file(let path, _), .firstRange(let path, _):
            sinkFile = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            if sinkFile < 0 { return POSIXError.localWriteError("open", path: path) }
        case .spool(let path, _):
            sinkFile = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            if sinkFile < 0 { return POSIXError.localWriteError("open", path: path) }
        case .range(let path, let range):
            pending.reserveCapacity(Int(min(Int64(Self.blockSize + 64 * 1024), Int64(range.count))))
            // The engine's existing file: never created or truncated here.
            sinkFile = open(path, O_WRONLY | O_CLOEXEC)
            if sinkFile < 0 { return POSIXError.localWriteError("open", path: path) }
        case .memory:
            break
        }
        var uploadPath: String?
        switch request.body {
        case .file(let path, _): uploadPath = path
        case .filePart(let path, let offset, let length):
            uploadPath = path
            uploadOffset = offset
            uploadLeft = length
        case .none, .data, .form: break
        }
        if let uploadPath {
            let path = uploadPath
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
    /// Parsed byte by byte: Foundation's trimming of each line was 3% of the CPU of a 4 KiB
    /// file's download. Names are lower-cased in ASCII (HTTP's names are ASCII); values lose
    /// their spaces and tabs at both ends.
    func header(_ bytes: UnsafeRawBufferPointer) {
        // On the bytes, without generic `split`s and lazy maps: every reply's head comes here,
        // line by line (a tenth of the CPU of a connection's thread downloading small files).
        func isBlank(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n")
        }
        let all = bytes.assumingMemoryBound(to: UInt8.self)
        var lower = 0
        var upper = all.count
        while lower < upper && isBlank(all[lower]) { lower += 1 }
        while upper > lower && isBlank(all[upper - 1]) { upper -= 1 }
        let line = UnsafeBufferPointer(rebasing: all[lower..<upper])
        if line.starts(with: "HTTP/".utf8) {
            // `HTTP/1.1 200 OK`: the second word is the status (0 when it is not a number).
            var start = 5
            while start < line.count && line[start] != UInt8(ascii: " ") { start += 1 }
            while start < line.count && line[start] == UInt8(ascii: " ") { start += 1 }
            var end = start
            while end < line.count && line[end] != UInt8(ascii: " ") { end += 1 }
            let status = Int(String(decoding: UnsafeBufferPointer(rebasing: line[start..<end]), as: UTF8.self)) ?? 0
            head = ReplyHead(status: status, headers: Dictionary(minimumCapacity: 16))
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(unsafeUninitializedCapacity: colon) { name in
            for index in 0..<colon {
                let byte = line[index]
                name[index] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
            }
            return colon
        }
        var start = colon + 1
        while start < line.count && isBlank(line[start]) { start += 1 }
        head.headers[name] = String(decoding: UnsafeBufferPointer(rebasing: line[start...]), as: UTF8.self)
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
        var firstRange: Range<Int64>?
        var resumable = false
        switch request.sink {
        case .firstRange(_, let range):
            firstRange = range
            resumable = true
        case .file: resumable = true
        case .range, .memory, .spool: break
        }
        if head.status == 206 && resumable {
            guard head.rangeStart == resumeAt else {
                failure = FileProviderError(.corruptData, "the server resumed at another byte than \(resumeAt)")
                return false
            }
            start = resumeAt
            // The range asked for; an attempt resumed past it (after a `200`) asked for the rest.
            if let firstRange { rangeEnd = resumeAt < firstRange.upperBound ? firstRange.upperBound : .max }
        }
        // A download started again from its first byte: a prefix recorded by an earlier,
        // ranged one is no longer true.
        if start == 0, firstRange != nil { PrefixRecord.forget(descriptor: sinkFile) }
        // Truncated only when longer than `start` (an earlier attempt's bytes, or a file the
        // engine reuses): ext4 writes a file truncated to 0 out when it is closed
        // (`auto_da_alloc`), a block write per downloaded file of a new, empty staging file.
        let length = lseek(sinkFile, 0, SEEK_END)
        if length != off_t(start)
            && (length < 0 || ftruncate(sinkFile, off_t(start)) != 0 || lseek(sinkFile, off_t(start), SEEK_SET) < 0)
        {
            failure = POSIXError.localWriteError("truncate", path: "the download file")
            return false
        }
        storedLength = start
        // An impossible size fails `validate` above for downloads of items; here it only
        // means no total for progress.
        total = try? head.resourceSize(of: "")
        // Room for a block of the body, or for the whole body when it is smaller (a 4 KiB
        // file's download does not map and unmap a 1 MiB buffer).
        let bodyLength = total.map { $0 - start } ?? Int64(Self.blockSize)
        pending.reserveCapacity(Int(min(Int64(Self.blockSize + 64 * 1024), max(0, bodyLength))))
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
        case .file, .spool:
            if case .spool(_, let limit) = request.sink, storedLength + Int64(pending.count) + Int64(bytes.count) > limit {
                failure = FileProviderError(.corruptData, "the reply is larger than \(limit) bytes")
                return 0
            }
            // libcurl hands over at most 16 KiB at a time; write in 1 MiB blocks.
            pending.append(contentsOf: bytes)
            if pending.count >= Self.blockSize && !flush() { return 0 }
        case .range, .firstRange:
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
        if let sink = sinks.download { pending.withUnsafeBytes { sink.consume($0, at: storedLength) } }
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
        let want = Int(min(Int64(buffer.count), uploadLeft))
        if want == 0 { return 0 }
        while true {
            let count =
                uploadOffset >= 0
                ? pread(uploadFile, buffer.baseAddress, want, off_t(uploadOffset)) : read(uploadFile, buffer.baseAddress, want)
            if count >= 0 {
                if let sink = sinks.upload, count > 0 {
                    sink.consume(
                        UnsafeRawBufferPointer(start: buffer.baseAddress, count: count),
                        at: uploadOffset >= 0 ? uploadOffset : uploadPosition)
                }
                if uploadOffset >= 0 { uploadOffset += Int64(count) } else { uploadPosition += Int64(count) }
                uploadLeft -= Int64(count)
                return count
            }
            if errno == EINTR { continue }
            failure = FileProviderError(.localIOFailure, "the file to upload could not be read: \(String(cString: strerror(errno)))")
            return fp_curl_read_abort()
        }
    }

    /// Reads the whole body of a `.file` upload into `buffer` (its size) before the request
    /// goes, through ``send(into:)`` (so the engine's sink sees the bytes as before). Returns
    /// `false`, with ``failure`` set, when the file cannot be read or ends before `buffer` is
    /// full (it shrank since its size was taken).
    func readWholeUpload(into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        var filled = 0
        while filled < buffer.count {
            let count = send(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            if failure != nil { return false }
            if count <= 0 {
                failure = FileProviderError(
                    .localIOFailure,
                    "the file to upload could not be read: it ended after \(filled) of its \(buffer.count) bytes (it changed while it was sent)"
                )
                return false
            }
            filled += count
        }
        return true
    }

    /// After a complete reply: checks an empty success body and that a file holds the whole
    /// resource.
    func finish() -> FileProviderError? {
        guard accept() else { return failure }
        guard isSuccess, sinkFile >= 0 else { return nil }
        var end: Int64?
        switch request.sink {
        case .range(_, let range): end = range.upperBound
        case .firstRange where head.status == 206: end = rangeEnd
        default: break
        }
        if let end {
            // A complete reply (or one this sink ended past the range) must hold the range up to
            // the end of the resource.
            guard let total else {
                return FileProviderError(.corruptData, "the reply to a ranged request gave no size")
            }
            let expected = max(resumeAt, min(end, total))
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

// libcurl's callbacks, set by HTTPConnection; each finds its HTTPTransfer in the user data.
let headerCallback: fp_curl_data_callback = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let transfer = Unmanaged<HTTPTransfer>.fromOpaque(context).takeUnretainedValue()
    transfer.header(UnsafeRawBufferPointer(start: buffer, count: size * count))
    return size * count
}

let writeCallback: fp_curl_data_callback = { buffer, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<HTTPTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receive(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

let readCallback: fp_curl_data_callback = { buffer, size, count, context in
    guard let context else { return fp_curl_read_abort() }
    let transfer = Unmanaged<HTTPTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.send(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

let progressCallback: fp_curl_xferinfo_callback = { context, _, downloaded, _, uploaded in
    guard let context else { return 0 }
    let transfer = Unmanaged<HTTPTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.shouldStop(downloaded: Int64(downloaded), uploaded: Int64(uploaded)) ? 1 : 0
}
