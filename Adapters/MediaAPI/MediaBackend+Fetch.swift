import AdapterKit
import Foundation
import ProviderCore

extension MediaBackend {
    /// Streams a file into `destination` with `GET /file`, resuming after `offset` bytes with
    /// `Range`.
    ///
    /// The body goes straight to `destination` as it arrives (constant memory). A transfer that
    /// breaks off is retried from where it stopped, after checking the file on the server is
    /// still the same version (its ETag, or with the original API its size and `Last-Modified`).
    /// With an extended server `version` is checked by the server with `If-Match`.
    /// - Throws: `noSuchItem` when the file is gone; `versionNoLongerAvailable` when `version`
    ///   is given and the server has another one, or the file changed during the transfer;
    ///   `invalidArgument` for a folder; `fileWriteOutOfSpace` when the disk holding
    ///   `destination` is full, `localIOFailure` when it cannot be written for another reason; `serverUnreachable` when the transfer fails after the retries; `cancelled`.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let path = try MediaPath(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let (request, seen) = fetchRequest(path, version: version, to: destination, offset: offset, progress: progress)
        let reply = try await request.sendResuming { request async throws(FileProviderError) in try await self.send(request) }
        return try await fetched(reply, of: path, identifier: identifier, seen: seen)
    }

    /// Streams several files, each into its destination, as ``fetchContents(for:version:to:offset:progress:)``
    /// does for one, their `GET`s as one sequence on one connection (``SequencedFetch``).
    /// Returns each file's outcome in the order of `requests`.
    public func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        await SequencedFetch.fetch(
            requests, progress: progress, client: client, backend: self,
            prepare: { (wanted, progress) -> (HTTPRequest, (MediaPath, FirstItem))? in
                guard let path = try? MediaPath(wanted.identifier), !path.isRoot else { return nil }
                let (request, seen) = fetchRequest(path, version: wanted.version, to: wanted.destination, offset: 0, progress: progress)
                return (request, (path, seen))
            },
            finish: { (reply, context: (MediaPath, FirstItem), wanted) async throws(FileProviderError) in
                try await fetched(reply, of: context.0, identifier: wanted.identifier, seen: context.1)
            })
    }

    /// The `GET /file` of a file into `destination` after its first `offset` bytes, and what
    /// its head says the file is once it came (``FirstItem``): the head is checked against
    /// `version` before a byte is written (with an extended server, the server checks it too,
    /// `If-Match`).
    private func fetchRequest(
        _ path: MediaPath, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) -> (HTTPRequest, FirstItem) {
        let seen = FirstItem()
        var request = HTTPRequest("GET", "/file", query: itemQuery(path))
        request.sink = .file(path: destination.path, offset: max(0, offset))
        request.progress = progress
        if dialect == .extended, let version, let etag = Self.etag(of: version) {
            request.headers.append("If-Match: \"\(etag)\"")
        }
        let dialect = self.dialect
        request.validate = { [self] head throws(FileProviderError) in
            let item = try self.fileItem(path, from: head, dialect: dialect)
            if let version, item.version.content != version.content {
                throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed on the server; the requested version is gone")
            }
            try seen.check(item)
        }
        return (request, seen)
    }

    /// The file a reply to ``fetchRequest(_:version:to:offset:progress:)`` brought.
    /// - Throws: what ``fetchContents(for:version:to:offset:progress:)`` throws for the reply.
    private func fetched(_ reply: HTTPReply, of path: MediaPath, identifier: ItemIdentifier, seen: FirstItem)
        async throws(FileProviderError)
        -> Item
    {
        try await checkRefusal(reply, of: path, identifier: identifier)
        try reply.check()
        guard let item = seen.value else { throw FileProviderError(.corruptData, "GET /file of \(path.display) gave no headers") }
        guard reply.fileLength == item.size else {
            throw FileProviderError(.corruptData, "the download of \(path.display) has \(reply.fileLength) of \(item.size) bytes")
        }
        return item
    }

    /// Writes bytes `range` of a file (clamped to its size) into `destination` at the same
    /// offsets with a ranged `GET /file` (`Range: bytes=a-b`); never truncates `destination` or
    /// writes outside the range.
    ///
    /// The version is checked on the reply's head before a byte is written: with an extended
    /// server by the server itself (`If-Match` with the ETag, `412` when it changed) and against
    /// the ETag the reply carries; with the original API against its size and `Last-Modified`.
    /// A `206` must start where asked; a server that ignores `Range` and sends the whole file
    /// (`200`) is read up to the range, skipping what comes before it; bytes past the range end
    /// the transfer and are never written. `416` (a range starting at or past the end) is the
    /// empty range. A transfer cut off is retried from where it stopped, after checking the
    /// version again.
    /// - Throws: `invalidArgument` for a folder, or an empty range or one starting below 0;
    ///   `noSuchItem` when the file is gone; `versionNoLongerAvailable` when its version is not
    ///   `version`; `corruptData` when the reply lies (a `206` starting elsewhere, fewer bytes
    ///   than the range holds in a complete reply, a `416` for a range inside the file, no or an
    ///   impossible size); `fileWriteOutOfSpace` when the disk holding `destination` is full,
    ///   `localIOFailure` when it cannot be opened or written for another reason;
    ///   `serverUnreachable` when the transfer fails after the retries; `cancelled`.
    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try PartialContents.validate(range)
        let path = try MediaPath(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let dialect = self.dialect
        let seen = FirstItem()
        var request = HTTPRequest("GET", "/file", query: itemQuery(path))
        request.sink = .range(path: destination.path, range: range)
        if dialect == .extended, let etag = Self.etag(of: version) { request.headers.append("If-Match: \"\(etag)\"") }
        request.validate = { [self] head throws(FileProviderError) in
            let item = try self.fileItem(path, from: head, dialect: dialect)
            if item.version.content != version.content {
                throw FileProviderError(
                    .versionNoLongerAvailable, "\(path.display) changed on the server; the requested version is gone")
            }
            try seen.check(item)
        }
        let reply = try await send(request)
        try await checkRefusal(reply, of: path, identifier: identifier)
        switch reply.status {
        case 416:
            // Nothing of the file at or past the range's start: the empty range, once the head
            // shows the file is of the version asked for.
            let item = try fileItem(path, from: reply.head, dialect: dialect)
            if item.version.content != version.content {
                throw FileProviderError(
                    .versionNoLongerAvailable, "\(path.display) changed on the server; the requested version is gone")
            }
            let written = PartialContents.clamp(range, toSize: item.size)
            guard written.isEmpty else {
                throw FileProviderError(
                    .corruptData,
                    "the server refused bytes \(range.lowerBound)-\(range.upperBound - 1) of \(path.display) as past its end, yet it has \(item.size) bytes"
                )
            }
            return PartialContents(item: item, range: written)
        default:
            try reply.check()
        }
        guard let item = seen.value else { throw FileProviderError(.corruptData, "GET /file of \(path.display) gave no headers") }
        let written = PartialContents.clamp(range, toSize: item.size)
        guard written.isEmpty || reply.fileLength == written.upperBound else {
            throw FileProviderError(
                .corruptData,
                "the ranged read of \(path.display) ended at byte \(reply.fileLength), not \(written.upperBound)")
        }
        return PartialContents(item: item, range: written)
    }

    /// Throws what a refused `GET /file` means, for both whole and ranged reads; returns for any
    /// other status (the caller checks it).
    /// - Throws: `noSuchItem` for 404 (`invalidArgument` when the original API's path is a
    ///   folder); `invalidArgument` for an extended server's 400 (a folder);
    ///   `versionNoLongerAvailable` for 412 (the ETag no longer matches).
    func checkRefusal(_ reply: HTTPReply, of path: MediaPath, identifier: ItemIdentifier) async throws(FileProviderError) {
        switch reply.status {
        case 404:
            if dialect == .original, try await originalFolderExists(path) {
                throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents to fetch")
            }
            throw .noSuchItem(identifier)
        case 400 where dialect == .extended:
            throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents to fetch")
        case 412:
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed on the server; the requested version is gone")
        default:
            return
        }
    }

    /// The item a `GET /file` reply describes. Its numbers are checked here, where they enter.
    ///
    /// - Throws: `corruptData` when the reply gives no size, an impossible size or date (see
    ///   ``ItemBounds``), or no ETag from an extended server.
    func fileItem(_ path: MediaPath, from head: ReplyHead, dialect: Dialect) throws(FileProviderError) -> Item {
        guard let size = try head.resourceSize(of: "GET /file of \(path.display)") else {
            throw FileProviderError(.corruptData, "the server gave no size for \(path.display)")
        }
        switch dialect {
        case .extended:
            guard let tag = head["etag"] else { throw FileProviderError(.corruptData, "the server gave no ETag for \(path.display)") }
            let etag = HTTPText.unquotedETag(tag)
            var modified: Int64?
            if let text = head["x-media-modified"] {
                guard let value = Int64(text), ItemBounds.problem(withNanoseconds: value, "") == nil else {
                    throw FileProviderError(
                        .corruptData,
                        "GET /file of \(path.display): the server sent X-Media-Modified \(text.prefix(40).debugDescription), which is not a date between 1700 and 2200"
                    )
                }
                modified = value
            }
            return Item(
                identifier: path.identifier, parentIdentifier: path.parent.identifier, filename: path.name, kind: .file,
                size: size, contentModificationDate: Self.date(nanoseconds: modified),
                version: Self.extendedVersion(etag: etag, modified: modified, kind: .file))
        case .original:
            let modified = head["last-modified"].flatMap(Self.parseHTTPDate)
            if let modified, let problem = ItemBounds.problem(withSeconds: modified, "modification date (Last-Modified)") {
                throw FileProviderError(.corruptData, "GET /file of \(path.display): \(problem)")
            }
            return originalFile(path, FileProbe(size: size, modified: modified))
        }
    }

    /// Returns a JPEG thumbnail from `GET /preview`: the centre square of the image, `size`
    /// pixels wide on an extended server; the original API makes 120×120 thumbnails only, which
    /// are returned for any `size` of at least 120.
    ///
    /// - Throws: `notSupported` when the item is not an image (or a folder), or, with the
    ///   original API, for a `size` under 120; `invalidArgument` for a `size` under 1 or over
    ///   the server's limit; `noSuchItem` when the item is gone.
    public func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError) -> Data {
        let path = try MediaPath(identifier)
        if path.isRoot { throw FileProviderError(.notSupported, "a folder has no thumbnail") }
        var query = itemQuery(path)
        switch dialect {
        case .extended:
            guard (1...maximumPreviewSize).contains(size) else {
                throw FileProviderError(.invalidArgument, "a thumbnail is 1 to \(maximumPreviewSize) pixels, not \(size)")
            }
            query.append(("size", String(size)))
        case .original:
            guard size >= Self.originalPreviewSize else {
                throw FileProviderError(.notSupported, "the media API makes 120×120 thumbnails only, not \(size)×\(size)")
            }
        }
        var request = HTTPRequest("GET", "/preview", query: query)
        request.sink = .memory(limit: 16 << 20)
        let reply = try await send(request)
        switch reply.status {
        case 404: throw .noSuchItem(identifier)
        case 400: throw FileProviderError(.notSupported, "\(path.display) is not an image the server can preview (\(reply.errorText))")
        default: try reply.check()
        }
        guard reply.body.starts(with: [0xFF, 0xD8, 0xFF]) else {
            throw FileProviderError(.corruptData, "the preview of \(path.display) is not a JPEG")
        }
        return reply.body
    }
}
