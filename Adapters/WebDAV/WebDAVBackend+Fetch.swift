import AdapterKit
import Foundation
import ProviderCore

extension WebDAVBackend {
    /// The file a `GET` reply's head describes: size, `ETag` and `Last-Modified`, its version
    /// in `form` (the listings' form: a stamp from `Last-Modified` and the size where they give
    /// no ETag, even when the reply has one).
    ///
    /// - Throws: `corruptData` when the head has no ETag (for `form` `etag`) or no date (for
    ///   `stamp`), no size or an impossible one.
    func fileItem(
        _ path: ItemPath, _ identifier: ItemIdentifier, parent: ItemIdentifier, from head: ReplyHead, form: VersionForms.Form
    )
        throws(FileProviderError) -> Item
    {
        guard let size = try head.resourceSize(of: "GET \(path.display)") else {
            throw FileProviderError(.corruptData, "GET \(path.display): the reply gave no size")
        }
        var response = DAVResponse()
        response.contentLength = String(size)
        response.etag = head["etag"]
        response.lastModified = head["last-modified"]
        response.contentType = head["content-type"]
        switch makeItem(response, at: path, identifier: identifier, parent: parent, form: form) {
        case .success(let item): return item
        case .failure(let refusal): throw FileProviderError(.corruptData, "GET \(path.display): \(refusal.reason)")
        }
    }

    /// The form of version a download at `path` reads from its reply: the form of `version`
    /// when one is asked for, else the form the server's listings gave. Before any listing
    /// (a download first thing after opening), the item is looked up once (`PROPFIND`
    /// `Depth: 0`) to learn it.
    ///
    /// - Throws: `versionNoLongerAvailable` for a version this backend did not make; `noSuchItem`
    ///   when nothing is at `path`; what ``item(at:)`` throws.
    func versionForm(asking version: ItemVersion?, at path: ItemPath) async throws(FileProviderError) -> VersionForms.Form {
        if let version {
            switch DAVVersion(version.content) {
            case .etag: return .etag
            case .stamp: return .stamp
            case nil: throw FileProviderError(.versionNoLongerAvailable, "\(path.display): the requested version is gone")
            }
        }
        if let form = versionForms.current { return form }
        guard try await item(at: path) != nil else { throw .noSuchItem(path.identifier) }
        return versionForms.current ?? .etag
    }

    /// What a failed `GET` means: a `404` of a path that is a collection is a folder.
    private func checkDownload(_ reply: HTTPReply, of path: ItemPath) async throws(FileProviderError) {
        switch reply.status {
        case 301, 403, 404, 405, 410:
            if let responses = try await propfind(path, depth: 0), responses.first?.isCollection == true {
                throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents")
            }
            if reply.status == 404 || reply.status == 410 { throw .noSuchItem(path.identifier) }
            try reply.check()
        case 412:
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed on the server; the requested version is gone")
        default: try reply.check()
        }
    }

    /// Streams a file into `destination` with `GET`, resuming after `offset` bytes with
    /// `Range`; a large file in ranges over several connections at once (``RangedDownload``:
    /// the first 16 MiB first, then, when more than 32 MiB are left, the rest in 16 MiB ranges,
    /// ``streamsPerDownload`` at once).
    ///
    /// The reply's `ETag` is checked against `version` before a byte is stored, and every
    /// attempt's and range's against the first (version and size), so a transfer resumed after
    /// a break, or put together from ranges, is one file; the
    /// whole file against the reply's `OC-Checksum` when it has a `SHA1:` (read once more). A
    /// `SHA256:` there becomes the item's `contentHash` (`sha256:<hex>`), which the engine
    /// checks against the hash it computed as the bytes were written, and refuses to place a
    /// download that does not match. (No
    /// `If-Match`: Apache fails it for a file changed within the last second, whose ETag is
    /// still weak.)
    /// - Throws: `noSuchItem` when the file is gone; `versionNoLongerAvailable` when `version`
    ///   is given and the server has another one, or the file changed during the transfer;
    ///   `invalidArgument` for the root; `corruptData` when the reply has no ETag or an
    ///   impossible size, fewer bytes than it announced, a range other than the one asked for,
    ///   another size for the same version, or bytes that do not match its
    ///   `OC-Checksum` (SHA-1); `fileWriteOutOfSpace` or
    ///   `localIOFailure` when `destination` cannot be written; `serverUnreachable` after the
    ///   retries; `cancelled`.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let (path, request, seen) = try await fetchRequest(for: identifier, version: version, progress: progress)
        let download = RangedDownload(streams: streamsPerDownload, files: hasher)
        let reply = try await download.fetch(request, into: destination.path, from: offset) {
            request async throws(FileProviderError) in try await self.send(request)
        }
        return try await fetched(reply, of: path, into: destination, seen: seen)
    }

    /// Streams several files, each into its destination, as ``fetchContents(for:version:to:offset:progress:)``
    /// does for one, their `GET`s as one sequence on one connection (``SequencedFetch``): the
    /// engine's batches hold files under 1 MiB, each one plain `GET` (as one stream of a ranged
    /// download would ask for it, whole). Returns each file's outcome in the order of `requests`.
    public func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        await SequencedFetch.fetch(
            requests, progress: progress, client: client, backend: self,
            prepare: { (wanted, progress) async -> (HTTPRequest, (ItemPath, FirstItem))? in
                guard
                    let (path, request, seen) = try? await fetchRequest(for: wanted.identifier, version: wanted.version, progress: progress)
                else { return nil }
                var whole = request
                whole.sink = .file(path: wanted.destination.path, offset: 0)
                return (whole, (path, seen))
            },
            finish: { (reply, context: (ItemPath, FirstItem), wanted) async throws(FileProviderError) in
                try await fetched(reply, of: context.0, into: wanted.destination, seen: context.1)
            })
    }

    /// The `GET` of the file `identifier` names (its sink for the caller to set), and what its
    /// head says the file is once it came (``FirstItem``): the head is checked against `version`
    /// before a byte is stored.
    /// - Throws: `invalidArgument` for the root or a folder's version; what ``versionForm(asking:at:)`` throws.
    private func fetchRequest(for identifier: ItemIdentifier, version: ItemVersion?, progress: ProgressHandler?)
        async throws(FileProviderError) -> (ItemPath, HTTPRequest, FirstItem)
    {
        let path = try await resolve(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let parent = try await parentIdentifier(of: path)
        let seen = FirstItem()
        var request = HTTPRequest("GET", endpoint(path))
        request.progress = progress
        if version == Self.folderVersion {
            throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents")
        }
        let form = try await versionForm(asking: version, at: path)
        request.validate = { [self] head throws(FileProviderError) in
            let item = try self.fileItem(path, identifier, parent: parent, from: head, form: form)
            if let version, item.version.content != version.content {
                throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed on the server; the requested version is gone")
            }
            try seen.check(item)
        }
        return (path, request, seen)
    }

    /// The file a reply to ``fetchRequest(for:version:progress:)`` brought into `destination`,
    /// checked against the reply's `OC-Checksum`.
    /// - Throws: what ``fetchContents(for:version:to:offset:progress:)`` throws for the reply.
    private func fetched(_ reply: HTTPReply, of path: ItemPath, into destination: URL, seen: FirstItem) async throws(FileProviderError)
        -> Item
    {
        try await checkDownload(reply, of: path)
        guard let item = seen.value else { throw FileProviderError(.corruptData, "GET \(path.display) gave no headers") }
        guard reply.fileLength == item.size else {
            throw FileProviderError(.corruptData, "the download of \(path.display) has \(reply.fileLength) of \(item.size) bytes")
        }
        try await verifyChecksum(reply.head["oc-checksum"], file: destination.path, of: path)
        var checked = item
        if let header = reply.head["oc-checksum"], let sha256 = try Self.digest("SHA256", length: 64, inChecksum: header, of: path) {
            checked.contentHash = "sha256:" + sha256
        }
        return checked
    }

    /// Writes bytes `range` of a file (clamped to its size) into `destination` at the same
    /// offsets with a ranged `GET` (`Range: bytes=a-b`, the reply's `ETag` checked first);
    /// never truncates `destination` or writes outside the range. `416` is the empty range.
    ///
    /// - Throws: `invalidArgument` for the root, an empty range or one starting below 0;
    ///   `noSuchItem` when the file is gone; `versionNoLongerAvailable` when its version is not
    ///   `version`; `corruptData` when the reply lies (a `206` starting elsewhere, too few
    ///   bytes, no or an impossible size); `localIOFailure` when `destination` cannot be
    ///   written; `serverUnreachable` after the retries; `cancelled`.
    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try PartialContents.validate(range)
        let path = try await resolve(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let parent = try await parentIdentifier(of: path)
        if version == Self.folderVersion {
            throw FileProviderError(.invalidArgument, "\(path.display) is a folder; it has no contents")
        }
        let form = try await versionForm(asking: version, at: path)
        let seen = FirstItem()
        var request = HTTPRequest("GET", endpoint(path))
        request.sink = .range(path: destination.path, range: range)
        request.validate = { [self] head throws(FileProviderError) in
            let item = try self.fileItem(path, identifier, parent: parent, from: head, form: form)
            if item.version.content != version.content {
                throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed on the server; the requested version is gone")
            }
            try seen.check(item)
        }
        let reply = try await send(request)
        if reply.status == 416 {
            // Nothing at or past the range's start: the empty range, if the file is still the
            // version asked for and the range really starts at or past its end.
            let item = try await self.item(for: identifier)
            return try PartialContents.refused(range, of: item, version: version, path: path.display)
        }
        try await checkDownload(reply, of: path)
        guard let item = seen.value else { throw FileProviderError(.corruptData, "GET \(path.display) gave no headers") }
        return PartialContents(item: item, range: PartialContents.clamp(range, toSize: item.size))
    }
}

extension WebDAVBackend {
    /// The SHA-1 an `OC-Checksum` value names (`SHA1:<40 hex digits>`, among others such as
    /// `MD5:…` or `ADLER32:…` separated by spaces), lowercased; `nil` when it names none.
    ///
    /// - Throws: `corruptData` when its `SHA1:` value is not 40 hex digits.
    static func sha1(inChecksum header: String, of path: ItemPath) throws(FileProviderError) -> String? {
        try digest("SHA1", length: 40, inChecksum: header, of: path)
    }

    /// The value of `algorithm` (`SHA1`, `SHA256`) an `OC-Checksum` value names, lowercased;
    /// `nil` when it names none.
    ///
    /// - Throws: `corruptData` when the value is not `length` hex digits.
    static func digest(_ algorithm: String, length: Int, inChecksum header: String, of path: ItemPath) throws(FileProviderError)
        -> String?
    {
        for part in header.split(whereSeparator: { $0 == " " || $0 == "," }) {
            guard let colon = part.firstIndex(of: ":"), part[..<colon].uppercased() == algorithm else { continue }
            let value = part[part.index(after: colon)...]
            guard value.utf8.count == length,
                value.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) })
            else {
                throw FileProviderError(
                    .corruptData, "\(path.display): the server's OC-Checksum \(header.prefix(80).debugDescription) is malformed")
            }
            return value.lowercased()
        }
        return nil
    }

    /// The SHA-1 of a local file, on the backend's hashing thread.
    ///
    /// - Throws: `localIOFailure` when it cannot be read; `cancelled`.
    func sha1(ofFile file: String) async throws(FileProviderError) -> String {
        try await hasher.run { () throws -> String in try SHA1Digest.ofFile(file) }
    }

    /// Checks a downloaded file against the `OC-Checksum` of the reply (Nextcloud and ownCloud
    /// send the checksum an upload gave); a reply without one, or with no `SHA1:` in it, is
    /// not checked.
    ///
    /// - Throws: `corruptData` when the bytes have another SHA-1 or the header is malformed;
    ///   `localIOFailure` when the file cannot be read.
    func verifyChecksum(_ header: String?, file: String, of path: ItemPath) async throws(FileProviderError) {
        guard let header, let expected = try Self.sha1(inChecksum: header, of: path) else { return }
        let actual = try await sha1(ofFile: file)
        guard actual == expected else {
            throw FileProviderError(
                .corruptData, "the download of \(path.display) does not match the server's OC-Checksum (SHA1 \(actual), not \(expected))")
        }
    }
}
