import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 whose every reply a test scripts: the protocol's normal
/// answers where it wants them (the media API, WebDAV), and faults: a status, a body cut short,
/// a connection reset, a stall, silence. It runs on threads of its own (blocking POSIX sockets), one
/// per connection. Request bodies are read; their first MiB is kept with the request.
public final class FaultServer: @unchecked Sendable {
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [String: String]
        public var headers: [String: String]
        /// The connection it came on: 1 for the first accepted, 2 for the next, …
        public var connection: Int = 0
        /// Its body's first ``bodyKept`` bytes (the rest is read and dropped).
        public var body = Data()
    }

    /// How many bytes of each request's body ``Request/body`` keeps.
    public static let bodyKept = 1 << 20

    public enum Action {
        /// A full reply.
        case reply(status: Int, headers: [String: String], body: Data)
        /// A full reply `seconds` after the request: a server, or a machine, too busy to answer
        /// at once (the wait is on the connection's own thread; other connections go on).
        case late(seconds: Double, status: Int, headers: [String: String], body: Data)
        /// Headers announcing `body.count` bytes, then only `sent` of them, then close.
        case truncate(body: Data, sent: Int, status: Int = 200, headers: [String: String] = [:])
        /// Close with a TCP reset before answering.
        case reset
        /// Headers and `sent` bytes, then nothing until the client gives up.
        case stall(body: Data, sent: Int, headers: [String: String] = [:])
        /// No answer at all (not even a status line) until the client gives up.
        case silence
        /// A status line and headers exactly as given (no `Content-Length` added), then `body`,
        /// then close: lengths and ranges that lie.
        case raw(status: Int, headers: [(String, String)], body: Data)
    }

    public let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var handler: (Request) -> Action
    private var log: [Request] = []
    private var stopped = false

    /// Starts listening on a free port of 127.0.0.1.
    ///
    /// - Throws: when no socket can be bound.
    public init(handler: @escaping (Request) -> Action) throws {
        self.handler = handler
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
                guard bind(fd, raw, length) == 0, listen(fd, 16) == 0 else { return -1 }
                return getsockname(fd, raw, &length)
            }
        }
        guard result == 0 else { throw CocoaError(.fileNoSuchFile) }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    public var url: String { "http://127.0.0.1:\(port)" }

    /// Stops accepting connections: wakes the accept loop, which closes the listening socket
    /// itself. Closed here, the socket's number could be reused (another test's server) before
    /// the loop's next `accept`, which would then take that server's connections and answer
    /// them with this server's handler; a second `close` of the number would close whatever
    /// another thread has opened under it since.
    public func stop() {
        let first: Bool = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    /// The requests seen so far.
    public var requests: [Request] { lock.withLock { log } }

    public func setHandler(_ handler: @escaping (Request) -> Action) { lock.withLock { self.handler = handler } }

    private func acceptLoop() {
        var accepted = 0
        defer { close(listener) }
        while true {
            // After `stop()` the shut-down socket refuses to accept.
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            if lock.withLock({ stopped }) {
                close(client)
                return
            }
            accepted += 1
            let connection = accepted
            let worker = Thread { [self] in self.serve(client, connection: connection) }
            worker.start()
        }
    }

    private func serve(_ client: Int32, connection: Int) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            // Read one request head.
            var headEnd: Int?
            while headEnd == nil {
                if let range = buffer.firstRange(of: Array("\r\n\r\n".utf8)) {
                    headEnd = range.upperBound
                    break
                }
                let count = recv(client, &chunk, chunk.count, 0)
                if count <= 0 {
                    close(client)
                    return
                }
                buffer += chunk[0..<count]
            }
            let head = String(decoding: buffer[0..<headEnd!], as: UTF8.self)
            buffer.removeFirst(headEnd!)
            let lines = head.components(separatedBy: "\r\n")
            let parts = lines[0].split(separator: " ")
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            var bodyLength = Int(headers["content-length"] ?? "0") ?? 0
            var body = Data()
            func keep(_ bytes: ArraySlice<UInt8>) {
                if body.count < Self.bodyKept { body.append(contentsOf: bytes.prefix(Self.bodyKept - body.count)) }
            }
            while bodyLength > 0 {
                if !buffer.isEmpty {
                    let take = min(bodyLength, buffer.count)
                    keep(buffer[0..<take])
                    buffer.removeFirst(take)
                    bodyLength -= take
                    continue
                }
                let count = recv(client, &chunk, min(chunk.count, bodyLength), 0)
                if count <= 0 { break }
                keep(chunk[0..<count])
                bodyLength -= count
            }
            let target = parts.count > 1 ? String(parts[1]) : "/"
            let pathPart = target.split(separator: "?", maxSplits: 1)
            var query: [String: String] = [:]
            if pathPart.count > 1 {
                for pair in pathPart[1].split(separator: "&") {
                    let kv = pair.split(separator: "=", maxSplits: 1)
                    let value = kv.count > 1 ? String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" : ""
                    query[String(kv[0])] = value
                }
            }
            let request = Request(
                method: parts.first.map(String.init) ?? "", path: String(pathPart[0]), query: query, headers: headers,
                connection: connection, body: body)
            let action: Action = lock.withLock {
                log.append(request)
                return handler(request)
            }
            switch action {
            case .reply(let status, let extra, let body):
                sendHead(client, status: status, headers: extra, length: body.count)
                sendAll(client, Array(body))
            case .late(let seconds, let status, let extra, let body):
                Thread.sleep(forTimeInterval: seconds)
                sendHead(client, status: status, headers: extra, length: body.count)
                sendAll(client, Array(body))
            case .truncate(let body, let sent, let status, let extra):
                sendHead(client, status: status, headers: extra, length: body.count)
                sendAll(client, Array(body.prefix(sent)))
                close(client)
                return
            case .reset:
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                close(client)
                return
            case .raw(let status, let extra, let body):
                var text = "HTTP/1.1 \(status) Status\r\n"
                for (name, value) in extra { text += "\(name): \(value)\r\n" }
                sendAll(client, Array((text + "\r\n").utf8) + Array(body))
                close(client)
                return
            case .silence:
                while recv(client, &chunk, chunk.count, 0) > 0 {}
                close(client)
                return
            case .stall(let body, let sent, let extra):
                sendHead(client, status: 200, headers: extra, length: body.count)
                sendAll(client, Array(body.prefix(sent)))
                // Hold the connection until the client gives up and closes it.
                while recv(client, &chunk, chunk.count, 0) > 0 {}
                close(client)
                return
            }
        }
    }

    private func sendHead(_ client: Int32, status: Int, headers: [String: String], length: Int) {
        var text = "HTTP/1.1 \(status) Status\r\nContent-Length: \(length)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        sendAll(client, Array(text.utf8))
    }

    private func sendAll(_ client: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            offset += count
        }
    }
}
