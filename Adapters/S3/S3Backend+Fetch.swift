import AdapterKit
import Foundation
import ProviderCore

extension S3Backend {
    /// The file a `GET` reply's head describes.
    func fileItem(_ path: ItemPath, from head: ReplyHead) throws(FileProviderError) -> Item {
        guard let size = try head.resourceSize(of: "GET \(path.display)") else {
            throw FileProviderError(.corruptData, "GET \(path.display): the reply gave no size")
        }
        return try fileItem(
            path, size: String(size), etag: head["etag"], versionID: head["x-amz-version-id"], lastModified: head["last-modified"],
            dateFormat: .http)
    }

    /// The ETag a version names, quoted for `If-Match`.
    static func ifMatch(_ version: ItemVersion) -> String { "\"\(S3ContentVersion(version).etag)\"" }

    /// The endpoint of a `GET` of a path's object: of the version `version` names when it
    /// names one (`?versionId=`: the bytes of one version, whatever is written meanwhile).
    func objectEndpoint(_ path: ItemPath, version: ItemVersion?) -> String {
        guard let id = version.flatMap({ S3ContentVersion($0).versionID }) else { return endpoint(key: key(path)) }
        return endpoint(key: key(path), query: [("versionId", id)])
    }

    /// What a failed `GET` means: `412` the version is gone; `404` of a version (`NoSuchVersion`)
    /// where an object still is, the version is gone; `404` of a folder's path
    /// `invalidArgument`, else `noSuchItem`.
    private func checkDownload(_ reply: HTTPReply, of path: ItemPath, pinned: Bool) async throws(FileProviderError) {
        switch reply.status {
        case 412:
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed in the bucket; the requested version is gone")
        case 404:
            if pinned, try await head(path) != nil {
                throw FileProviderError(
                    .versionNoLongerAvailable, "\(path.display): the requested version is no longer in the bucket (NoSuchVersion)")
            }
            if try await folderExists(path) {
                throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents")
            }
            throw .noSuchItem(path.identifier)
        default: try check(reply)
        }
    }

    /// Streams an object into `destination` with `GET` (`If-Match` on the version's ETag, and
    /// `?versionId=` of the version's id in a versioned bucket: then the bytes are that
    /// version's even when the key is written meanwhile), resuming after `offset` bytes with
    /// `Range`; every attempt's ETag and version id are checked against the first. The whole file is checked against the object's SHA-256 when the server gives it
    /// (`x-amz-checksum-sha256`, asked for with `x-amz-checksum-mode: ENABLED`), and against its
    /// ETag when that is the MD5 of its bytes (``verify(file:head:etag:of:)``).
    ///
    /// - Throws: `noSuchItem` when the object is gone; `versionNoLongerAvailable` when
    ///   `version` is given and the bucket has another one (in a versioned bucket: when that
    ///   version was deleted), or the object changed during the transfer; `invalidArgument` for a folder; `corruptData` when the reply has no ETag,
    ///   an impossible size, fewer bytes than it announced, or bytes that do not match its
    ///   checksum or MD5 ETag; `localIOFailure` when `destination` cannot be written; what
    ///   ``S3ErrorMapping/check(_:bucket:)`` throws.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let path = try path(of: identifier)
        if path.isRoot || version == Self.folderVersion {
            throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents")
        }
        var (request, seen) = fetchRequest(path, version: version, to: destination, offset: offset, progress: progress)
        var reply = try await send(request)
        if reply.status == 416 {
            // The offset is past the end: the object is shorter now; fetch it all.
            request.sink = .file(path: destination.path, offset: 0)
            reply = try await send(request)
        }
        return try await fetched(reply, of: path, version: version, into: destination, seen: seen)
    }

    /// Streams several objects, each into its destination, as ``fetchContents(for:version:to:offset:progress:)``
    /// does for one, their `GET`s as one sequence on one connection (``SequencedFetch``).
    /// Returns each file's outcome in the order of `requests`.
    public func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        await SequencedFetch.fetch(
            requests, progress: progress, client: client, backend: self,
            prepare: { (wanted, progress) -> (HTTPRequest, (ItemPath, FirstItem))? in
                guard let path = try? path(of: wanted.identifier), !path.isRoot, wanted.version != Self.folderVersion else { return nil }
                let (request, seen) = fetchRequest(path, version: wanted.version, to: wanted.destination, offset: 0, progress: progress)
                return (request, (path, seen))
            },
            finish: { (reply, context: (ItemPath, FirstItem), wanted) async throws(FileProviderError) in
                try await fetched(reply, of: context.0, version: wanted.version, into: wanted.destination, seen: context.1)
            })
    }

    /// The `GET` of an object (of `version`'s bytes where it names a version) into
    /// `destination` after its first `offset` bytes, and what its head says the object is once
    /// it came (``FirstItem``): the head is checked against `version` before a byte is written.
    private func fetchRequest(
        _ path: ItemPath, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) -> (HTTPRequest, FirstItem) {
        let seen = FirstItem()
        var request = HTTPRequest("GET", objectEndpoint(path, version: version))
        request.sink = .file(path: destination.path, offset: max(0, offset))
        request.progress = progress
        request.headers = ["x-amz-checksum-mode: ENABLED"]
        if let version { request.headers.append("If-Match: \(Self.ifMatch(version))") }
        request.validate = { [self] head throws(FileProviderError) in
            let item = try self.fileItem(path, from: head)
            if let version, !S3ContentVersion(item.version).matches(S3ContentVersion(version)) {
                throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed in the bucket; the requested version is gone")
            }
            try seen.check(item)
        }
        return (request, seen)
    }

    /// The object a reply to ``fetchRequest(_:version:to:offset:progress:)`` brought, its bytes
    /// checked (``verify(file:head:etag:of:)``).
    /// - Throws: what ``fetchContents(for:version:to:offset:progress:)`` throws for the reply.
    private func fetched(_ reply: HTTPReply, of path: ItemPath, version: ItemVersion?, into destination: URL, seen: FirstItem)
        async throws(FileProviderError) -> Item
    {
        try await checkDownload(reply, of: path, pinned: version.flatMap { S3ContentVersion($0).versionID } != nil)
        guard let item = seen.value else { throw FileProviderError(.corruptData, "GET \(path.display) gave no headers") }
        guard reply.fileLength == item.size else {
            throw FileProviderError(.corruptData, "the download of \(path.display) has \(reply.fileLength) of \(item.size) bytes")
        }
        try await verify(file: destination.path, head: reply.head, etag: S3ContentVersion(item.version).etag, of: path)
        return item
    }

    /// Checks a downloaded file against what the server says of its bytes, in one read of it:
    /// the base64 SHA-256 of `x-amz-checksum-sha256` (not a composite one: `…-N`, or any of a
    /// multipart object, `…-N` ETag, unless `x-amz-checksum-type` says `FULL_OBJECT`: moto
    /// 5.2.1 gives the composite checksum without its `-N`), and the ETag
    /// where it is a plain MD5 (a single-part upload's; not a multipart upload's `…-N`, nor an
    /// SSE-KMS or SSE-C object's).
    ///
    /// - Throws: `corruptData` when the bytes have another hash or the checksum is not a
    ///   SHA-256; `localIOFailure` when the file cannot be read.
    func verify(file: String, head: ReplyHead, etag: String, of path: ItemPath) async throws(FileProviderError) {
        var wantedSHA: Data?
        let composite =
            head["x-amz-checksum-type"].map { $0.uppercased() != "FULL_OBJECT" } ?? etag.utf8.contains(UInt8(ascii: "-"))
        // Bytes, not `String.contains(_:)`: Foundation's search bridges to `NSString` (2% of the
        // cooperative threads' CPU of 10,000 downloads).
        if let checksum = head["x-amz-checksum-sha256"], !checksum.utf8.contains(UInt8(ascii: "-")), !composite {
            guard let wanted = Data(base64Encoded: checksum.trimmingCharacters(in: .whitespaces)), wanted.count == 32 else {
                throw FileProviderError(
                    .corruptData,
                    "\(path.display): the server's x-amz-checksum-sha256 \(checksum.prefix(80).debugDescription) is not a SHA-256")
            }
            wantedSHA = wanted
        }
        let wantedMD5 = Self.isPlainMD5(etag) && Self.etagIsMD5(head) ? etag.lowercased() : nil
        if wantedSHA == nil && wantedMD5 == nil { return }
        let needsSHA = wantedSHA != nil
        let digests = try await hashers.run { () throws -> FileDigests in try FileDigests.of(file: file, sha256: needsSHA) }
        if let wantedSHA, let actual = digests.sha256, Data(actual) != wantedSHA {
            throw FileProviderError(
                .corruptData,
                "the download of \(path.display) does not match the server's x-amz-checksum-sha256 (\(Data(actual).base64EncodedString()), not \(wantedSHA.base64EncodedString()))"
            )
        }
        if let wantedMD5, digests.md5Hex != wantedMD5 {
            throw FileProviderError(
                .corruptData,
                "the download of \(path.display) does not match its ETag, the MD5 of its bytes (\(digests.md5Hex), not \(wantedMD5))")
        }
    }

    /// Writes bytes `range` of an object (clamped to its size) into `destination` at the same
    /// offsets with a ranged `GET` (`If-Match` on the version's ETag, `?versionId=` of its id in
    /// a versioned bucket); never truncates
    /// `destination` or writes outside the range. `416` is the empty range.
    ///
    /// - Throws: `invalidArgument` for a folder, an empty range or one starting below 0;
    ///   `noSuchItem` when the object is gone; `versionNoLongerAvailable` when its version is
    ///   not `version`; `corruptData` when the reply lies (a `206` starting elsewhere, too few
    ///   bytes, no or an impossible size); `localIOFailure` when `destination` cannot be
    ///   written; what ``S3ErrorMapping/check(_:bucket:)`` throws.
    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try PartialContents.validate(range)
        let path = try path(of: identifier)
        if path.isRoot || version == Self.folderVersion {
            throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents")
        }
        let seen = FirstItem()
        var request = HTTPRequest("GET", objectEndpoint(path, version: version))
        request.sink = .range(path: destination.path, range: range)
        request.headers = ["If-Match: \(Self.ifMatch(version))"]
        request.validate = { [self] head throws(FileProviderError) in
            let item = try self.fileItem(path, from: head)
            if !S3ContentVersion(item.version).matches(S3ContentVersion(version)) {
                throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed in the bucket; the requested version is gone")
            }
            try seen.check(item)
        }
        let reply = try await send(request)
        if reply.status == 416 {
            guard let item = try await head(path, version: version) else { throw .noSuchItem(identifier) }
            return try PartialContents.refused(range, of: item, version: version, path: path.display)
        }
        try await checkDownload(reply, of: path, pinned: S3ContentVersion(version).versionID != nil)
        guard let item = seen.value else { throw FileProviderError(.corruptData, "GET \(path.display) gave no headers") }
        return PartialContents(item: item, range: PartialContents.clamp(range, toSize: item.size))
    }
}
