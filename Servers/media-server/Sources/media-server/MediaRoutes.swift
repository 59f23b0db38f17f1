import Foundation
import Hummingbird
import NIOCore
import Thumbnails

#if canImport(Glibc)
    import Glibc
#endif

/// Extra header names of the extended API.
enum MediaHeader {
    static let modified = HTTPFields.Element.Name("X-Media-Modified")!
}

/// The endpoints of the media API (Docs/MediaAPI.md).
struct MediaRoutes: Sendable {
    let store: MediaStore
    let token: String?
    let previews = PreviewCache()
    let fileIO = FileIO()

    /// The extensions `GET /capabilities` lists.
    static let extensions = [
        "typed-listing", "listing-pages", "stat", "etag", "conditional-writes", "atomic-uploads", "move",
        "conditional-delete", "preview-sizes",
    ]

    func register(on router: Router<BasicRequestContext>) {
        router.get("/") { _, _ in json(["message": "Hello world!"]) }
        router.get("/capabilities") { request, _ in try handle(request) { () throws(MediaError) in try capabilities() } }
        router.get("/media") { request, _ in try handle(request) { () throws(MediaError) in try list(request) } }
        router.post("/media") { request, _ in try await handleAsync(request) { try await makeFolder(request) } }
        router.delete("/media") { request, _ in try handle(request) { () throws(MediaError) in try delete(request) } }
        router.get("/stat") { request, _ in try handle(request) { () throws(MediaError) in try stat(request) } }
        router.get("/file") { request, context in try await handleAsync(request) { try await download(request, context: context) } }
        router.head("/file") { _, _ in Response(status: .methodNotAllowed) }
        router.post("/file") { request, _ in try await handleAsync(request) { try await upload(request) } }
        router.post("/move") { request, _ in try handle(request) { () throws(MediaError) in try move(request) } }
        router.get("/preview") { request, _ in try handle(request) { () throws(MediaError) in try preview(request) } }
    }

    // MARK: Plumbing

    private func authorize(_ request: Request) throws(MediaError) {
        guard let token else { return }
        guard request.headers[.authorization] == "Bearer \(token)" else {
            throw MediaError(status: 401, message: "a valid bearer token is required")
        }
    }

    private func handle(_ request: Request, _ body: () throws(MediaError) -> Response) throws -> Response {
        do {
            try authorize(request)
            return try body()
        } catch {
            return failure(error)
        }
    }

    private func handleAsync(_ request: Request, _ body: () async throws -> Response) async throws -> Response {
        do {
            try authorize(request)
            return try await body()
        } catch let error as MediaError {
            return failure(error)
        } catch {
            return failure(MediaError(status: 500, message: String(describing: error)))
        }
    }

    private func failure(_ error: MediaError) -> Response {
        let status = HTTPResponse.Status(code: error.status)
        if error.plainText {
            return Response(
                status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: error.message + "\n")))
        }
        return json(["error": error.message], status: status)
    }

    private func query(_ request: Request) throws(MediaError) -> [String: String] {
        do {
            return try FormDecoding.decode(request.uri.query.map { Substring($0) })
        } catch {
            throw .badRequest("the query has \(error.reason)")
        }
    }

    /// The folder and the name of an item from `path` and `id`.
    private func item(_ fields: [String: String]) throws(MediaError) -> (folder: [String], name: String) {
        let folder = try store.components(fields["path"] ?? "")
        guard let id = fields["id"] else { throw .badRequest("the id parameter is missing") }
        return (folder, try store.name(id))
    }

    private func requireExtended() throws(MediaError) {
        if store.compat { throw MediaError(status: 404, message: "404 page not found", plainText: true) }
    }

    private static func ifMatch(_ request: Request) -> String? { request.headers[.ifMatch] }

    /// Whether an `If-Match` value names this etag (`*` names anything).
    private static func matches(_ header: String, _ etag: String) -> Bool {
        for candidate in header.split(separator: ",") {
            var value = candidate.trimmingCharacters(in: .whitespaces)
            if value == "*" { return true }
            if value.hasPrefix("W/") { value.removeFirst(2) }
            if value.hasPrefix("\"") && value.hasSuffix("\"") && value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            if value == etag { return true }
        }
        return false
    }

    /// Checks `If-Match` and `If-None-Match` against the item now at a path (extended mode).
    /// A missing item with `If-Match` is 404, so clients tell "gone" from "changed".
    private func checkConditions(_ request: Request, current: Status?) throws(MediaError) {
        if store.compat { return }
        if let header = Self.ifMatch(request) {
            guard let current else { throw .notFound("nothing is there") }
            if !Self.matches(header, current.etag) { throw MediaError(status: 412, message: "the item changed (its etag is \(current.etag))") }
        }
        if let header = request.headers[.ifNoneMatch], current != nil {
            if header.trimmingCharacters(in: .whitespaces) == "*" || Self.matches(header, current!.etag) {
                throw MediaError(status: 412, message: "an item is already there")
            }
        }
    }

    // MARK: Endpoints

    private func capabilities() throws(MediaError) -> Response {
        try requireExtended()
        struct Document: Encodable {
            var api = "media"
            var version = 1
            var extensions: [String]
            var maxUploadSize: Int64? = nil
            var maxPreviewSize = 1024
        }
        return json(Document(extensions: Self.extensions))
    }

    private func list(_ request: Request) throws(MediaError) -> Response {
        let fields = try query(request)
        let names = try store.components(fields["path"] ?? "")
        var after: String?
        var limit: Int?
        if !store.compat {
            after = fields["after"]
            if let text = fields["limit"] {
                guard let value = Int(text), value > 0 else { throw .badRequest("limit must be a positive number") }
                limit = value
            }
        }
        return json(try store.list(names, after: after, limit: limit))
    }

    private func stat(_ request: Request) throws(MediaError) -> Response {
        try requireExtended()
        let fields = try query(request)
        var names = try store.components(fields["path"] ?? "")
        if let id = fields["id"] { names.append(try store.name(id)) }
        guard let status = store.status(names) else { throw .notFound("nothing is there") }
        return json(store.entry(name: names.last ?? "", status: status, typed: true), headers: [.eTag: "\"\(status.etag)\""])
    }

    private func makeFolder(_ request: Request) async throws -> Response {
        let type = request.headers[.contentType] ?? ""
        let body = try await request.body.collect(upTo: 1 << 20)
        let bytes = Array(body.readableBytesView)
        let fields: [String: String]
        if type.hasPrefix("multipart/form-data") {
            fields = FormDecoding.multipartField("path", body: bytes, contentType: type).map { ["path": $0] } ?? [:]
        } else if type.hasPrefix("application/x-www-form-urlencoded") {
            do {
                fields = try FormDecoding.decode(Substring(decoding: bytes, as: UTF8.self))
            } catch {
                throw MediaError.badRequest("the form has \(error.reason)")
            }
        } else {
            throw MediaError.badRequest("send the folder as a form field 'path'")
        }
        guard let path = fields["path"] else { throw MediaError.badRequest("the form field 'path' is missing") }
        let names = try store.components(path)
        if store.compat {
            try store.makeFolder(names, parents: true)
            return json(["message": "created"], status: .created)
        }
        let parents = fields["parents"].map { $0 != "0" && $0 != "false" } ?? true
        try store.locked { () throws(MediaError) in
            let current = store.status(names)
            try checkConditions(request, current: current)
            if let current, current.kind == .file { throw MediaError(status: 409, message: "a file is in the way") }
            try store.makeFolder(names, parents: parents)
        }
        guard let status = store.status(names) else { throw MediaError(status: 500, message: "the folder vanished") }
        return json(EntryReply(message: "created", entry: store.entry(name: names.last ?? "", status: status, typed: true)), status: .created)
    }

    private func delete(_ request: Request) throws(MediaError) -> Response {
        let fields = try query(request)
        let names = try store.components(fields["path"] ?? "")
        if names.isEmpty { throw .badRequest("the root cannot be removed") }
        if store.compat {
            try store.remove(names)
            return json(["message": "removed"])
        }
        let recursive = fields["recursive"].map { $0 != "0" && $0 != "false" } ?? true
        try store.locked { () throws(MediaError) in
            let current = store.status(names)
            try checkConditions(request, current: current)
            if !recursive, let current, current.kind == .folder, store.hasChildren(names) {
                throw MediaError(status: 409, message: "the folder is not empty")
            }
            try store.remove(names)
        }
        return json(["message": "removed"])
    }

    private func download(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let fields = try query(request)
        let (folder, name) = try item(fields)
        let names = folder + [name]
        guard let status = store.status(names), status.kind == .file else {
            if !store.compat, store.status(names)?.kind == .folder { throw MediaError.badRequest("\(name.debugDescription) is a folder") }
            throw MediaError(status: 404, message: "404 page not found", plainText: store.compat)
        }
        try checkConditions(request, current: status)
        var headers: HTTPFields = [
            .contentType: Self.contentType(name), .lastModified: httpDate(nanos: status.modifiedNanos),
            .acceptRanges: "bytes",
        ]
        if !store.compat {
            headers[.eTag] = "\"\(status.etag)\""
            headers[MediaHeader.modified] = String(status.modifiedNanos)
        }
        let path = store.fullPath(names)
        let size = Int(status.size)
        if let range = request.headers[.range] {
            guard let (start, end) = Self.parseRange(range, size: size) else {
                headers[.contentRange] = "bytes */\(size)"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            }
            headers[.contentRange] = "bytes \(start)-\(end)/\(size)"
            let body = try await fileIO.loadFile(path: path, range: start...end, context: context, chunkLength: 1 << 20)
            return Response(status: .partialContent, headers: headers, body: body)
        }
        let body = try await fileIO.loadFile(path: path, context: context, chunkLength: 1 << 20)
        return Response(status: .ok, headers: headers, body: body)
    }

    /// One byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`) clamped to the file, or `nil` when
    /// it cannot be satisfied.
    static func parseRange(_ header: String, size: Int) -> (Int, Int)? {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = header.dropFirst(6)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, size > 0 else { return nil }
        if parts[0].isEmpty {
            guard let suffix = Int(parts[1]), suffix > 0 else { return nil }
            return (max(0, size - suffix), size - 1)
        }
        guard let start = Int(parts[0]), start >= 0, start < size else { return nil }
        if parts[1].isEmpty { return (start, size - 1) }
        guard let end = Int(parts[1]), end >= start else { return nil }
        return (start, min(end, size - 1))
    }

    static func contentType(_ name: String) -> String {
        let lower = name.lowercased()
        if lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") { return "image/jpeg" }
        if lower.hasSuffix(".png") { return "image/png" }
        if lower.hasSuffix(".gif") { return "image/gif" }
        if lower.hasSuffix(".webp") { return "image/webp" }
        return "application/octet-stream"
    }

    private func upload(_ request: Request) async throws -> Response {
        let fields = try query(request)
        let (folder, name) = try item(fields)
        let names = folder + [name]
        if let type = request.headers[.contentType], type.hasPrefix("multipart/form-data") || type.hasPrefix("application/x-www-form-urlencoded") {
            throw MediaError.badRequest("send the file as the raw body, not as a form")
        }
        guard store.status(folder)?.kind == .folder else {
            throw MediaError(status: store.compat ? 400 : 404, message: "the folder \(folder.joined(separator: "/").debugDescription) does not exist")
        }
        if store.compat {
            // As the original: written in place, cut off with 400 after 25 MiB.
            let file = try UploadFile(path: store.fullPath(names), exclusive: false)
            defer { file.close() }
            var total = 0
            for try await buffer in request.body {
                let room = MediaStore.compatUploadLimit - total
                let count = min(room, buffer.readableBytes)
                try buffer.withUnsafeReadableBytes { raw throws(MediaError) in try file.write(UnsafeRawBufferPointer(rebasing: raw[0..<count])) }
                total += count
                if count < buffer.readableBytes { throw MediaError.badRequest("http: request body too large") }
            }
            return json(["message": "created a file with size: \(total)"], status: .created)
        }
        // Extended: refuse early what would be refused anyway, stream to a temporary file in
        // the same folder, then check again and rename into place under the lock.
        let before = store.status(names)
        if before?.kind == .folder { throw MediaError(status: 409, message: "a folder is in the way") }
        try checkConditions(request, current: before)
        let temporary = store.fullPath(folder + [MediaStore.uploadPrefix + UUID().uuidString])
        let file = try UploadFile(path: temporary, exclusive: true)
        var total = 0
        do {
            for try await buffer in request.body {
                try buffer.withUnsafeReadableBytes { raw throws(MediaError) in try file.write(raw) }
                total += buffer.readableBytes
            }
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length != total {
                throw MediaError.badRequest("the body was \(total) bytes, not \(length)")
            }
            file.close()
            try store.locked { () throws(MediaError) in
                let current = store.status(names)
                if current?.kind == .folder { throw MediaError(status: 409, message: "a folder is in the way") }
                try checkConditions(request, current: current)
                if Glibc.rename(temporary, store.fullPath(names)) != 0 {
                    throw MediaError(status: 500, message: "rename: \(String(cString: strerror(errno)))")
                }
            }
        } catch {
            file.close()
            unlink(temporary)
            throw error
        }
        guard let status = store.status(names) else { throw MediaError(status: 500, message: "the upload vanished") }
        return json(
            EntryReply(message: "created a file with size: \(total)", entry: store.entry(name: name, status: status, typed: true)),
            status: .created, headers: [.eTag: "\"\(status.etag)\""])
    }

    private func move(_ request: Request) throws(MediaError) -> Response {
        try requireExtended()
        let fields = try query(request)
        let source = try store.components(fields["from"] ?? "")
        let target = try store.components(fields["to"] ?? "")
        if source.isEmpty || target.isEmpty { throw .badRequest("the root cannot be moved") }
        if target.count > source.count, Array(target.prefix(source.count)).elementsEqualBytes(source) {
            throw .badRequest("a folder cannot be moved into itself")
        }
        let status: Status = try store.locked { () throws(MediaError) -> Status in
            let current = store.status(source)
            try checkConditions(request, current: current)
            guard current != nil else { throw .notFound("nothing is at the source") }
            guard store.status(Array(target.dropLast()))?.kind == .folder else { throw .notFound("the target folder does not exist") }
            if target.elementsEqualBytes(source) { return current! }
            if store.status(target) != nil { throw MediaError(status: 409, message: "an item is already at the target") }
            try store.rename(from: source, to: target)
            guard let moved = store.status(target) else { throw MediaError(status: 500, message: "the item vanished") }
            return moved
        }
        return json(EntryReply(message: "moved", entry: store.entry(name: target.last ?? "", status: status, typed: true)))
    }

    private func preview(_ request: Request) throws(MediaError) -> Response {
        let fields = try query(request)
        let (folder, name) = try item(fields)
        let names = folder + [name]
        var size = Thumbnailer.defaultSize
        if !store.compat, let text = fields["size"] {
            guard let value = Int(text), (1...1024).contains(value) else { throw .badRequest("size must be 1 to 1024") }
            size = value
        }
        guard let status = store.status(names) else { throw .notFound("source not found") }
        guard status.kind == .file else { throw .badRequest("not an image") }
        let key = PreviewCache.Key(path: names.joined(separator: "/"), etag: status.etag, size: size)
        let data: Data
        if let cached = previews.get(key) {
            data = cached
        } else {
            do {
                data = try Thumbnailer.jpeg(fromFileAt: store.fullPath(names), size: size)
            } catch {
                throw MediaError(status: error.code == .noSuchItem ? 404 : 400, message: error.code == .noSuchItem ? "source not found" : "not an image: \(error.message)")
            }
            previews.put(key, data)
        }
        var headers: HTTPFields = [.contentType: "image/jpeg"]
        if !store.compat { headers[.eTag] = "\"\(status.etag)-\(size)\"" }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}

struct EntryReply: Encodable {
    var message: String
    var entry: Entry
}

/// Recent previews by path, etag and size: a changed file has a new etag, so its preview is
/// made again.
final class PreviewCache: @unchecked Sendable {
    struct Key: Hashable {
        var path: String
        var etag: String
        var size: Int
    }

    private let lock = NSLock()
    private var entries: [Key: Data] = [:]
    private var order: [Key] = []

    func get(_ key: Key) -> Data? { lock.withLock { entries[key] } }

    func put(_ key: Key, _ data: Data) {
        lock.withLock {
            if entries.updateValue(data, forKey: key) == nil { order.append(key) }
            while order.count > 256 { entries[order.removeFirst()] = nil }
        }
    }
}

extension Array where Element == String {
    func elementsEqualBytes(_ other: [String]) -> Bool {
        count == other.count && zip(self, other).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
    }
}

func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
    let data = (try? JSONEncoder().encode(value)) ?? Data("{}".utf8)
    var fields = headers
    fields[.contentType] = "application/json; charset=utf-8"
    return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
}
