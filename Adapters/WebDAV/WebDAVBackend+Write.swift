import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension WebDAVBackend {
    /// Creates a file (`PUT` with `If-None-Match: *`) or a folder (`MKCOL`) from a template.
    ///
    /// An existing item is never overwritten, except by a replay with `mayAlreadyExist`, which
    /// writes the file again (so it ends with the template's contents) or takes the existing
    /// folder. A file larger than the server's last `quota-available-bytes` is refused before a
    /// byte is sent.
    /// - Throws: `invalidFilename` for an unsafe name; `noSuchItem` when the parent does not
    ///   exist; `filenameCollision` when the name is taken (without `mayAlreadyExist`, or by an
    ///   item of another kind); `notSupported` for a symlink; `insufficientQuota` when the
    ///   server is full (`507`, or the quota it announced); `localIOFailure` when `contents`
    ///   cannot be read; `corruptData` when the server kept a different size than was sent.
    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let new = try await NewItem(template, options: options, reservedPrefix: nil, resolve: resolve)
        let (parent, path, replay) = (new.parent, new.path, new.replay)
        switch template.kind {
        case .symlink:
            throw FileProviderError(.notSupported, "WebDAV cannot hold symlinks")
        case .folder:
            let reply = try await send(HTTPRequest("MKCOL", endpoint(path, collection: true)))
            switch reply.status {
            case 400, 405:
                // Something is there already (Apache: 405 for a folder, 400 for a file)?
                guard try await propfind(path, depth: 0) != nil else {
                    try reply.check()
                    break
                }
                if replay, let existing = try? await item(at: path), existing.kind == .folder {
                    return ItemResult(item: existing)
                }
                throw collision(path)
            case 409: throw .noSuchItem(parent.identifier)
            default: try reply.check()
            }
            return ItemResult(item: try await writtenItem(path))
        case .file:
            let source = contents?.path ?? "/dev/null"
            let size = try UploadFile.size(atPath: source)
            var headers = ["If-None-Match: *"]
            if replay {
                if let existing = try? await item(at: path), existing.kind != .file { throw collision(path) }
                headers = []
            }
            let (reply, head) = try await put(path, from: source, size: size, headers: headers, then: headRequest(path))
            switch reply.status {
            case 412: throw collision(path)
            case 405: throw collision(path)
            case 404, 409: throw .noSuchItem(parent.identifier)
            default: try reply.check()
            }
            return ItemResult(item: try await uploadedItem(path, size: size, head: head))
        }
    }

    /// Changes a file's contents (`PUT` with `If-Match`), renames or moves an item (`MOVE` with
    /// `Overwrite: F`, and `If-Match` for a file). Dates and other fields are accepted and
    /// ignored: the server sets its own.
    ///
    /// A folder's version is checked just before a move (WebDAV gives folders no usable ETag).
    /// - Throws: `noSuchItem` when the item or the new parent is gone; `versionOutOfDate` when
    ///   the item's version is not `baseVersion` (nothing is changed); `filenameCollision` when
    ///   the new name is taken; `invalidFilename` for an unsafe new name; `invalidArgument` for
    ///   new contents on a folder, renaming the root, or moving a folder into itself;
    ///   `insufficientQuota` when the server is full.
    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?,
        options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        let change = try await ItemChange(item, changedFields: changedFields, resolve: resolve)
        let path = change.path
        var current: Item?
        var tag = Self.etag(of: baseVersion)
        // A stamp (no ETag on this server): the version is checked here before each write.
        var stamp = Self.isStamp(baseVersion) ? baseVersion : nil
        let isFolder = baseVersion == Self.folderVersion
        if changedFields.contains(.contents) {
            if isFolder { throw FileProviderError(.invalidArgument, "\(path.display) is not a file; its contents cannot be set") }
            guard tag != nil || stamp != nil else { throw .versionOutOfDate(item.identifier) }
            let source = contents?.path ?? "/dev/null"
            let size = try UploadFile.size(atPath: source)
            let headers = tag.map { ["If-Match: \($0)"] } ?? []
            let (reply, head) = try await sendIfMatch(path, tag: tag) { () throws(FileProviderError) in
                try await put(path, from: source, size: size, headers: headers, expecting: stamp, then: headRequest(path))
            }
            switch reply.status {
            case 404: throw .noSuchItem(item.identifier)
            case 405, 409: throw FileProviderError(.invalidArgument, "\(path.display) is not a file; its contents cannot be set")
            case 412: throw try await preconditionFailed(path)
            default: try reply.check()
            }
            let uploaded = try await uploadedItem(path, size: size, head: head)
            current = uploaded
            tag = Self.etag(of: uploaded.version)
            stamp = Self.isStamp(uploaded.version) ? uploaded.version : nil
        }
        if change.renames {
            let parent = if let moved = change.movesTo { try await resolve(moved) } else { path.parent }
            let target = try parent.child(named: change.name, reservedPrefix: nil)
            if !target.identifier.rawValue.utf8.elementsEqual(path.identifier.rawValue.utf8) {
                if path.contains(target) {
                    throw FileProviderError(.invalidArgument, "\(path.display) cannot be moved into itself")
                }
                if isFolder {
                    let now = try await self.item(for: item.identifier)
                    if now.kind != .folder { throw .versionOutOfDate(item.identifier) }
                } else if tag == nil && stamp == nil {
                    throw .versionOutOfDate(item.identifier)
                }
                current = try await move(path, to: target, isFolder: isFolder, ifMatch: isFolder ? nil : tag, expecting: stamp)
            }
        }
        if let current { return ItemResult(item: current) }
        let now = try await self.item(for: item.identifier)
        if now.version.content != baseVersion.content { throw .versionOutOfDate(item.identifier) }
        return ItemResult(item: now)
    }

    /// Deletes an item (`DELETE`, with `If-Match` on a file's base version); a folder with
    /// everything in it only when `options` has `recursive` (WebDAV always deletes a folder
    /// with its contents, so the adapter lists it first).
    ///
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when its version is not
    ///   `baseVersion`; `directoryNotEmpty` for a non-empty folder without `recursive`;
    ///   `deletionRejected` for the root.
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        let path = try await resolve(identifier)
        if path.isRoot { throw FileProviderError(.deletionRejected, "the root of a domain cannot be deleted") }
        let current = try await item(for: identifier)
        if let baseVersion, baseVersion.content != current.version.content { throw .versionOutOfDate(identifier) }
        var request = HTTPRequest("DELETE", endpoint(path, collection: current.kind == .folder))
        var ifMatch: String?
        if current.kind == .folder {
            if !options.contains(.recursive) {
                let page = try await enumerateItems(in: identifier, startingAt: .initialPageSortedByName)
                if !page.items.isEmpty || !page.refused.isEmpty {
                    throw FileProviderError(.directoryNotEmpty, "\(path.display) is not empty")
                }
            }
        } else if let tag = Self.etag(of: baseVersion ?? current.version) {
            request.headers = ["If-Match: \(tag)"]
            ifMatch = tag
        }
        let reply = try await sendIfMatch(path, tag: ifMatch) { () throws(FileProviderError) in try await send(request) }.reply
        switch reply.status {
        case 404: throw .noSuchItem(identifier)
        case 412: throw try await preconditionFailed(path)
        default: try reply.check()
        }
        places.forget(below: path)
    }

    // MARK: Shared

    func collision(_ path: ItemPath) -> FileProviderError {
        FileProviderError(.filenameCollision, "an item named \(path.name.debugDescription) already exists in \(path.parent.display)")
    }

    /// What a `412` to `If-Match` means: the item is gone (`noSuchItem`) or changed
    /// (`versionOutOfDate`).
    private func preconditionFailed(_ path: ItemPath) async throws(FileProviderError) -> FileProviderError {
        guard try await propfind(path, depth: 0) != nil else { return .noSuchItem(path.identifier) }
        return .versionOutOfDate(path.identifier)
    }

    /// Sends a request that carries `If-Match: tag` (`send`), and sends it again while a `412`
    /// comes only from a weak ETag: Apache fails `If-Match` for a file changed within the last
    /// second or so (its ETag is weak, `W/"…"`) even when the value is the same, and makes the
    /// ETag strong once the change is older (by the server's clock). So while the server's ETag
    /// has the value of `tag`, this sends the request again: at once when the ETag is strong by
    /// now, else after ``weakTagPause``; at most ``weakTagRetries`` times. Any other `412`, and
    /// the last one, is returned. With `tag` `nil` the request is sent once.
    ///
    /// The bound is a number of attempts, not a time on this side: each attempt starts at least
    /// a pause after the server answered the one before, so the attempts span at least
    /// `weakTagRetries` pauses of the server's time however slowly the replies reach the
    /// adapter. (A deadline on the adapter's clock gave up on a loaded machine, where the first
    /// reply took longer than the whole deadline, and refused a write from the current
    /// version as `versionOutOfDate`.)
    private func sendIfMatch(
        _ path: ItemPath, tag: String?, _ send: () async throws(FileProviderError) -> HTTPReply
    ) async throws(FileProviderError) -> (reply: HTTPReply, head: HTTPReply?) {
        try await sendIfMatch(path, tag: tag) { () throws(FileProviderError) in (try await send(), nil) }
    }

    /// ``sendIfMatch(_:tag:_:)`` for a write sent with the `HEAD` that reads it back (``put(_:from:size:headers:expecting:then:)``).
    private func sendIfMatch(
        _ path: ItemPath, tag: String?, _ send: () async throws(FileProviderError) -> (reply: HTTPReply, head: HTTPReply?)
    ) async throws(FileProviderError) -> (reply: HTTPReply, head: HTTPReply?) {
        var retries = 0
        while true {
            let sent = try await send()
            let reply = sent.reply
            guard let tag, reply.status == 412, retries < Self.weakTagRetries else { return sent }
            retries += 1
            // The same value, weak (or strong by now, when it turned strong after the 412).
            guard let responses = try await propfind(path, depth: 0), case .tag(let current) = EntityTag.parse(responses.first?.etag),
                current.quoted == tag
            else { return sent }
            if current.isWeak {
                do {
                    try await Task.sleep(for: Self.weakTagPause)
                } catch {
                    throw FileProviderError(.cancelled, "cancelled")
                }
            }
        }
    }

    /// How many times a conditional write refused for a weak ETag of the base version's value
    /// is sent again (see `sendIfMatch`).
    static let weakTagRetries = 16
    /// The pause before a conditional write refused for a weak ETag is sent again: Apache's
    /// ETag turns strong one second after the change, so 16 pauses of 250 ms leave it 4 s.
    static let weakTagPause = Duration.milliseconds(250)

    /// `MOVE` with `Overwrite: F`, and `If-Match: tag` for a file with an ETag; a file with a
    /// stamp is checked to still have the version `expecting` just before.
    private func move(_ source: ItemPath, to target: ItemPath, isFolder: Bool, ifMatch tag: String?, expecting stamp: ItemVersion?)
        async throws(FileProviderError) -> Item
    {
        if let stamp { try await checkVersion(source, is: stamp) }
        var request = HTTPRequest("MOVE", endpoint(source, collection: isFolder))
        request.headers = ["Destination: \(absoluteURL(target, collection: isFolder))", "Overwrite: F"]
        if let tag {
            request.headers.append("If-Match: \(tag)")
            try await checkConditions(source, headers: ["If-Match: \(tag)"])
        }
        // Apache answers 500 to a move into a folder that does not exist.
        request.finalStatuses = [500]
        let reply = try await sendIfMatch(source, tag: tag) { () throws(FileProviderError) in
            let reply = try await send(request)
            // Overwrite: F with something at the target: no point in sending again.
            if reply.status == 412, try await propfind(target, depth: 0) != nil {
                throw FileProviderError(
                    .filenameCollision, "an item named \(target.name.debugDescription) already exists in \(target.parent.display)")
            }
            return reply
        }.reply
        switch reply.status {
        case 404: throw FileProviderError(.noSuchItem, "\(source.display) is gone")
        case 409: throw .noSuchItem(target.parent.identifier)
        case 412: throw try await preconditionFailed(source)
        case 403, 500:
            // Apache answers 500, Go's x/net/webdav 403, to a move of something missing or into
            // a folder that does not exist.
            if try await propfind(source, depth: 0) == nil { throw FileProviderError(.noSuchItem, "\(source.display) is gone") }
            if try await propfind(target.parent, depth: 0) == nil { throw .noSuchItem(target.parent.identifier) }
            try reply.check()
        default: try reply.check()
        }
        places.move(source, to: target)
        return try await writtenItem(target)
    }

    /// `PUT` streaming `source`, after checking the upload fits the announced quota and, on a
    /// server that ignores conditional headers, that they hold. With `--vendor nextcloud` or
    /// `owncloud` it sends the file's `OC-Checksum` (``uploadChecksum(of:)``).
    ///
    /// - Throws: `insufficientQuota` when `size` is over the server's last
    ///   `quota-available-bytes`; `noSuchItem` when the server answers `500` and the folder
    ///   `path` is in is gone (nginx); `corruptData` when the server says the bytes it got do not
    ///   match the checksum (``DAVError/isChecksumRefusal(status:body:)``: ownCloud's and
    ///   ownCloud Infinite Scale's `400` with Sabre's `BadRequest` error body); `localIOFailure` when `source` cannot be read; what
    ///   ``checkConditions(_:headers:)`` throws.
    ///
    /// With `next` (the `HEAD` that reads the file back, ``headRequest(_:)``), that request goes
    /// right after a successful `PUT` on the same connection (``HTTPClient/send(_:then:cancellation:)``),
    /// and its reply comes back with the `PUT`'s; `nil` when it was not sent or needs sending
    /// again alone.
    func put(
        _ path: ItemPath, from source: String, size: Int64, headers: [String], expecting stamp: ItemVersion? = nil,
        then next: HTTPRequest? = nil
    )
        async throws(FileProviderError)
        -> (reply: HTTPReply, head: HTTPReply?)
    {
        if let available = availableBytes, size > available {
            throw FileProviderError(
                .insufficientQuota, "\(path.display) is \(size) bytes; the server has \(available) bytes available")
        }
        try await checkConditions(path, headers: headers)
        if let stamp { try await checkVersion(path, is: stamp) }
        var headers = headers
        if let checksum = try await uploadChecksum(of: source) { headers.append("OC-Checksum: \(checksum)") }
        let reply: HTTPReply
        var head: HTTPReply?
        if let uploads, size > chunkSize {
            reply = try await putInChunks(path, from: source, size: size, headers: headers, uploads: uploads)
        } else {
            var request = HTTPRequest("PUT", endpoint(path))
            request.body = .file(path: source, size: size)
            request.headers = headers
            // nginx answers 500 to a PUT into a folder that does not exist: not worth retrying.
            request.finalStatuses = [500]
            let first: HTTPReply
            if let next { (first, head) = try await send(request, then: next) } else { first = try await send(request) }
            if first.status == 500 {
                if !path.parent.isRoot, try await propfind(path.parent, depth: 0) == nil {
                    throw FileProviderError(.noSuchItem, "the folder \(path.parent.display) is gone")
                }
                request.finalStatuses = []
                reply = try await send(request)
            } else {
                reply = first
            }
        }
        if vendor.hasFileIDs, DAVError.isChecksumRefusal(status: reply.status, body: reply.body) {
            throw FileProviderError(.corruptData, "the server received other bytes for \(path.display) than were sent (OC-Checksum)")
        }
        return (reply, head)
    }

    /// The `OC-Checksum` an upload of `source` carries, computed in one read of the file before
    /// the request (the header comes before the body): `SHA256:<hex>` to Nextcloud, which keeps
    /// it and gives it back with the file (`GET`'s `OC-Checksum`, checked then by the engine
    /// against the hash of the bytes it wrote); `SHA1:<hex>` to ownCloud, which checks it and
    /// knows no SHA-256 (SHA1, MD5 and ADLER32 only); none to other servers, which take no
    /// checksum (the file would be read once more for a header they ignore).
    ///
    /// - Throws: `localIOFailure` when `source` cannot be read; `cancelled`.
    func uploadChecksum(of source: String) async throws(FileProviderError) -> String? {
        switch vendor {
        case .nextcloud: return "SHA256:" + (try await hasher.run { () throws -> String in try SHA256Digest.ofFile(source) })
        case .owncloud: return "SHA1:" + (try await sha1(ofFile: source))
        case .other: return nil
        }
    }

    /// Nextcloud's chunked upload (v2): `MKCOL` of a collection of the adapter's own under the
    /// user's uploads (`fileprovider-<UUID>`), a `PUT` of each chunk (numbered from 1, at most
    /// 10,000, each ``chunkSize`` or larger so that they fit), then a `MOVE` of its `.file` to
    /// the destination with `OC-Total-Length` and `headers` (the conditions and
    /// `OC-Checksum`), which the server checks as it would for a `PUT`. Returns the reply to the
    /// `MOVE`, to be read as the reply to a `PUT`; the upload collection is deleted when a step
    /// fails.
    ///
    /// - Throws: `localIOFailure` when `source` cannot be read; what ``AdapterKit/HTTPReply/check()``
    ///   throws for a chunk the server refuses; `serverUnreachable` after the retries.
    func putInChunks(_ path: ItemPath, from source: String, size: Int64, headers: [String], uploads: HTTPClient)
        async throws(FileProviderError) -> HTTPReply
    {
        let folder = "/fileprovider-" + UUID().uuidString
        let destination = "Destination: \(absoluteURL(path))"
        let total = "OC-Total-Length: \(size)"
        var make = HTTPRequest("MKCOL", folder)
        make.headers = [destination]
        try await send(make, on: uploads).check()
        do {
            let piece = max(chunkSize, (size + 9_999) / 10_000)
            var offset: Int64 = 0
            var number = 1
            while offset < size {
                let length = Int(min(piece, size - offset))
                let start = offset
                let chunk = try await hasher.run { () throws -> Data in try Self.read(source, at: start, count: length) }
                var request = HTTPRequest("PUT", folder + "/" + String(format: "%05d", number))
                request.body = .data(chunk, contentType: "application/octet-stream")
                request.headers = [destination, total]
                try await send(request, on: uploads).check()
                offset += Int64(length)
                number += 1
            }
            var assemble = HTTPRequest("MOVE", folder + "/.file")
            assemble.headers = [destination, total] + headers
            let reply = try await send(assemble, on: uploads)
            if !reply.isSuccess { _ = try? await send(HTTPRequest("DELETE", folder), on: uploads) }
            return reply
        } catch {
            _ = try? await send(HTTPRequest("DELETE", folder), on: uploads)
            throw error
        }
    }

    /// `count` bytes of a file from `offset`; call it off the cooperative pool.
    ///
    /// - Throws: `localIOFailure` when the file cannot be read or is shorter.
    static func read(_ path: String, at offset: Int64, count: Int) throws(FileProviderError) -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw FileProviderError(.localIOFailure, "the file to upload \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(fd) }
        var data = Data(count: count)
        var done = 0
        while done < count {
            let got = data.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                throw FileProviderError(.localIOFailure, "the file to upload \(path) changed or cannot be read while it was sent")
            }
            done += got
        }
        return data
    }

    /// On a server that ignores `If-Match` and `If-None-Match` (``capabilities`` without
    /// `supportsConditionalWrites`), checks them here just before the write: not atomic, a
    /// race with another writer stays possible. Does nothing on a server that checks them.
    ///
    /// - Throws: `filenameCollision` when `If-None-Match: *` is asked and something is at
    ///   `path`; `noSuchItem` when `If-Match` is asked and nothing is there;
    ///   `versionOutOfDate` when its ETag is another.
    func checkConditions(_ path: ItemPath, headers: [String]) async throws(FileProviderError) {
        guard !conditions.isSet else { return }
        for header in headers {
            if header == "If-None-Match: *" {
                if try await propfind(path, depth: 0) != nil { throw collision(path) }
            } else if header.hasPrefix("If-Match: ") {
                let tag = header.dropFirst("If-Match: ".count)
                guard let responses = try await propfind(path, depth: 0) else { throw .noSuchItem(path.identifier) }
                guard case .tag(let current) = EntityTag.parse(responses.first?.etag), current.quoted == tag else {
                    throw .versionOutOfDate(path.identifier)
                }
            }
        }
    }

    /// Checks, just before a write, that the file at `path` still has the version `expected`
    /// (a stamp: the server gives no ETag to send in `If-Match`). Not atomic with the write.
    ///
    /// - Throws: `noSuchItem` when nothing is there; `versionOutOfDate` when it has another
    ///   version; what ``item(at:)`` throws.
    func checkVersion(_ path: ItemPath, is expected: ItemVersion) async throws(FileProviderError) {
        guard let now = try await item(at: path) else { throw .noSuchItem(path.identifier) }
        if now.version.content != expected.content { throw .versionOutOfDate(path.identifier) }
    }

    /// Whether the server checks conditional headers on writes: what `memory` remembers for
    /// ``baseURL`` and `user`, else the probe (``serverChecksConditions()``), whose answer
    /// `memory` then keeps. Without `memory` the server is probed.
    ///
    /// - Throws: what ``serverChecksConditions()`` throws.
    func checksConditions(memory: ProbeMemory?, user: String?) async throws(FileProviderError) -> Bool {
        guard let memory else { return try await serverChecksConditions() }
        let url = baseURL
        if let known = try await hasher.run({ memory.recall(url: url, user: user) }) { return known }
        let checks = try await serverChecksConditions()
        try await hasher.run { memory.remember(checks, url: url, user: user) }
        return checks
    }

    /// Whether the server checks conditional headers on writes: a `PUT` of an empty file with
    /// a name of the adapter's own (`.fileprovider-probe-<UUID>` in the root) and an
    /// `If-Match` that cannot hold. `412` means it checks them (Apache, Nextcloud); anything
    /// else means it does not (Go's `x/net/webdav`, as `rclone serve webdav` runs it, writes
    /// the file, which is deleted again at once), or cannot tell (a read-only root).
    ///
    /// - Throws: `serverUnreachable` after the retries; `cancelled`.
    func serverChecksConditions() async throws(FileProviderError) -> Bool {
        let path = ItemPath.root.appending(".fileprovider-probe-\(UUID().uuidString)")
        var request = HTTPRequest("PUT", endpoint(path))
        request.headers = ["If-Match: \"fileprovider-probe\""]
        request.body = .data(Data(), contentType: "application/octet-stream")
        let reply = try await send(request)
        if reply.status == 412 { return true }
        if reply.isSuccess { _ = try? await send(HTTPRequest("DELETE", endpoint(path))) }
        return false
    }

    /// The item a write that succeeded made at `path`.
    ///
    /// - Throws: `invalidFilename` when nothing is there: the server kept the item under
    ///   another name (`rclone serve webdav` lists a name with a control character with a
    ///   Unicode picture of it instead, `line␊break` for `line\nbreak`); what
    ///   ``item(for:)`` throws.
    func writtenItem(_ path: ItemPath) async throws(FileProviderError) -> Item {
        guard let item = try await item(at: path) else {
            throw FileProviderError(
                .invalidFilename,
                "the server accepted \(path.name.debugDescription) but keeps it under another name; use a name without control characters"
            )
        }
        return item
    }

    /// The item after an upload, checking the server kept every byte: read from a `HEAD` of
    /// the file (``headItem(_:)``) where that can tell, else from a `PROPFIND`.
    ///
    /// - Throws: `corruptData` when the server kept another size; what ``writtenItem(_:)``
    ///   throws.
    /// - Parameter head: the reply to the `HEAD` sent with the upload, if it was; else it is
    ///   sent now.
    func uploadedItem(_ path: ItemPath, size: Int64, head: HTTPReply? = nil) async throws(FileProviderError) -> Item {
        let item: Item
        if let head = try await headItem(path, reply: head) { item = head } else { item = try await writtenItem(path) }
        guard item.kind == .file, item.size == size else {
            throw FileProviderError(
                .corruptData,
                "the server kept \(item.size) of the \(size) bytes sent for \(path.display) (or another writer replaced it at the same moment)"
            )
        }
        return item
    }

    /// The file at `path` as a `HEAD` describes it, as a `GET`'s head does for a download
    /// (``fileItem(_:_:parent:from:form:)``: size, `ETag` or date, in the form the server's
    /// listings gave), or `nil` where it cannot tell: a server whose items have identifiers of
    /// their own (`oc:fileid`), no listing read yet (the form is not known), any status but
    /// `200`, a head without the size or the version. Cheaper than a `PROPFIND` for both sides
    /// (no XML to write or read); what uploads check their result with.
    ///
    /// - Throws: `serverUnreachable` after the retries; `cancelled`.
    /// - Parameter reply: the reply to ``headRequest(_:)`` when it was sent already.
    func headItem(_ path: ItemPath, reply sent: HTTPReply? = nil) async throws(FileProviderError) -> Item? {
        guard let request = headRequest(path), let form = versionForms.current else { return nil }
        let reply = if let sent { sent } else { try await send(request) }
        guard reply.status == 200 else { return nil }
        let parent = try await parentIdentifier(of: path)
        return try? fileItem(path, path.identifier, parent: parent, from: reply.head, form: form)
    }

    /// The `HEAD` ``headItem(_:reply:)`` reads a file at `path` with; `nil` where a head cannot
    /// tell (a server whose items have identifiers of their own, the root, no listing read yet).
    func headRequest(_ path: ItemPath) -> HTTPRequest? {
        guard !vendor.hasFileIDs, !path.isRoot, versionForms.current != nil else { return nil }
        return HTTPRequest("HEAD", endpoint(path))
    }
}
