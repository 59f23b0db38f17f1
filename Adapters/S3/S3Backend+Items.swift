import AdapterKit
import Foundation
import ProviderCore

extension S3Backend {
    /// One `ListObjectsV2` page under `prefix`, or with `versions` one `ListObjectVersions`
    /// page (`?versions`: every version and delete marker, with version ids; the caller takes
    /// the current objects, ``S3Object/isCurrentObject``).
    ///
    /// - Parameters:
    ///   - delimiter: list one level (`delimiter=/`: common prefixes for folders) or every key
    ///     below.
    ///   - token: the continuation token of the page before, or `nil` for the first. For a
    ///     listing of versions, the page before's `NextVersionIdMarker`, a space and its
    ///     `NextKeyMarker` (``S3Listing/versionsToken``).
    /// - Throws: `corruptData` when the reply is not a complete `ListBucketResult` (or
    ///   `ListVersionsResult`), is for another prefix, holds a key outside `prefix`, says it is
    ///   truncated without a continuation token (or key marker) or with an empty page, gives
    ///   back the token it was asked with (a server that would list the same page forever), or,
    ///   for versions, has an entry that does not say whether it is the latest or two latest
    ///   versions of a key; what ``S3ErrorMapping/check(_:bucket:)`` throws.
    func listPage(prefix: String, delimiter: Bool, token: String?, maxKeys: Int = S3Backend.pageSize, versions: Bool = false)
        async throws(FileProviderError) -> S3Listing
    {
        var query: [(String, String)] = [("prefix", prefix), ("max-keys", String(maxKeys))]
        query.append(versions ? ("versions", "") : ("list-type", "2"))
        if delimiter { query.append(("delimiter", "/")) }
        if let token {
            if versions {
                let space = token.firstIndex(of: " ") ?? token.startIndex
                let id = String(token[..<space])
                query.append(("key-marker", String(token[token.index(after: space)...])))
                if !id.isEmpty { query.append(("version-id-marker", id)) }
            } else {
                query.append(("continuation-token", token))
            }
        }
        // The bucket itself, without a trailing slash (path-style: `/BUCKET`, as the server signs it).
        var request = HTTPRequest("GET", HTTPClient.canonicalQuery(query))
        request.sink = .memory(limit: 16 << 20)
        let reply = try await send(request)
        try check(reply)
        let body = reply.body
        let what = "the listing of \(prefix.isEmpty ? "the bucket" : "'\(prefix)'")"
        var listing: S3Listing = try await worker.run { () throws -> S3Listing in
            do throws(S3ListingError) {
                return try S3Listing.parse(body, limit: maxKeys + maxKeys, versions: versions)
            } catch {
                throw FileProviderError(.corruptData, "\(what): \(error.reason)")
            }
        }
        if let said = listing.prefix, said != prefix {
            throw FileProviderError(.corruptData, "\(what): the server listed the prefix '\(said.prefix(200))' instead")
        }
        for key in listing.objects.map(\.key) + listing.commonPrefixes where !key.utf8.starts(with: prefix.utf8) {
            throw FileProviderError(.corruptData, "\(what): the server listed the key '\(key.prefix(200))', which is outside it")
        }
        if versions {
            var latest = Set<String>()
            for object in listing.objects {
                guard let isLatest = object.isLatest else {
                    throw FileProviderError(
                        .corruptData, "\(what): the server did not say whether a version of '\(object.key.prefix(200))' is the latest")
                }
                if isLatest && !latest.insert(object.key).inserted {
                    throw FileProviderError(.corruptData, "\(what): the server listed two latest versions of '\(object.key.prefix(200))'")
                }
            }
            // Where the next page starts, in the form of a continuation token.
            listing.nextContinuationToken = listing.versionsToken
        }
        if listing.isTruncated {
            guard let next = listing.nextContinuationToken, !next.isEmpty else {
                throw FileProviderError(.corruptData, "\(what): the server said there is more but gave no continuation token")
            }
            if listing.objects.isEmpty && listing.commonPrefixes.isEmpty {
                throw FileProviderError(.corruptData, "\(what): the server sent a page with nothing on it and said there is more")
            }
            if next == token {
                throw FileProviderError(
                    .corruptData,
                    "\(what): the server gave back the continuation token it was asked with (it would list the same page forever)")
            }
        }
        return listing
    }

    /// The path an identifier names.
    /// - Throws: `noSuchItem` for an identifier no item of a bucket can have.
    func path(of identifier: ItemIdentifier) throws(FileProviderError) -> ItemPath { try ItemPath(identifier) }

    /// The root folder's item.
    var rootItem: Item {
        Item(
            identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "", kind: .folder,
            version: Self.folderVersion)
    }

    /// The folder item of a path.
    func folderItem(_ path: ItemPath) -> Item {
        if path.isRoot { return rootItem }
        return Item(
            identifier: path.identifier, parentIdentifier: path.parent.identifier, filename: path.name, kind: .folder,
            version: Self.folderVersion)
    }

    /// The file item of an object. Its content version is the ETag, and the version id in a
    /// versioned bucket (``S3ContentVersion``; `versionID` is ignored in a bucket without
    /// versions, so a listing and a `HEAD` always agree).
    ///
    /// - Throws: `corruptData` naming the key when its size is missing or impossible, its ETag
    ///   missing, not a token or too long for a version (with the version id), its version id
    ///   not a token, or its date impossible.
    func fileItem(
        _ path: ItemPath, size: String?, etag: String?, versionID: String? = nil, lastModified: String?, dateFormat: DateForm
    ) throws(FileProviderError) -> Item {
        let what = "the object '\(key(path))'"
        guard let size, let bytes = Int64(HTTPText.trimmed(size)), ItemBounds.problem(withSize: bytes) == nil
        else {
            throw FileProviderError(
                .corruptData, "\(what) has the size \(size?.prefix(40).debugDescription ?? "none"), which no file can have")
        }
        guard let tag = etag.map(HTTPText.unquotedETag), !tag.isEmpty, tag.utf8.count <= ItemVersion.maximumLength else {
            throw FileProviderError(.corruptData, "\(what) has no ETag, or one longer than \(ItemVersion.maximumLength) bytes")
        }
        let version = try S3ContentVersion(etag: tag, versionID: versioned ? versionID : nil, of: what)
        var date: Date?
        if let lastModified {
            date = dateFormat == .iso8601 ? Self.isoDate(lastModified) : Self.httpDate(lastModified)
            if let found = date, let problem = ItemBounds.problem(withDate: found, "its modification date") {
                throw FileProviderError(.corruptData, "\(what): \(problem)")
            }
        }
        return Item(
            identifier: path.identifier, parentIdentifier: path.parent.identifier, filename: path.name, kind: .file, size: bytes,
            contentModificationDate: date, version: version.itemVersion)
    }

    enum DateForm { case iso8601, http }

    /// A listing's `LastModified` (`2026-12-05T08:29:00.000Z`): parsed by hand
    /// (``AdapterKit/HTTPDate``), a formatter only for another form.
    static func isoDate(_ text: String) -> Date? {
        let bare = HTTPText.trimmed(text)
        if let date = HTTPDate.rfc3339(bare) { return date }
        let trimmed = String(bare)
        if let date = try? Date(trimmed, strategy: .iso8601) { return date }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: trimmed)
    }

    /// A reply's `Last-Modified` or `Date` (`Sun, 06 Nov 1994 08:49:37 GMT`): parsed by hand
    /// (``AdapterKit/HTTPDate``; a `DateFormatter` made per reply was 13% of the CPU of a
    /// download of 4 KiB files), a formatter only for another zone or form.
    static func httpDate(_ text: String) -> Date? {
        if let date = HTTPDate.rfc1123(HTTPText.trimmed(text)) { return date }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text.trimmingCharacters(in: .whitespaces))
    }

    /// What is at a path: a file (its `HEAD`), a folder (a marker or keys below it), or
    /// nothing (`nil`).
    ///
    /// - Throws: what ``S3ErrorMapping/check(_:bucket:)`` throws; `corruptData` for an
    ///   impossible object.
    func item(at path: ItemPath) async throws(FileProviderError) -> Item? {
        if path.isRoot { return rootItem }
        if let file = try await head(path) { return file }
        return try await folderExists(path) ? folderItem(path) : nil
    }

    /// The file at a path, from a `HEAD` of its key (of the version `version` names, where it
    /// names one); `nil` when there is none.
    func head(_ path: ItemPath, version: ItemVersion? = nil) async throws(FileProviderError) -> Item? {
        var request = HTTPRequest("HEAD", objectEndpoint(path, version: version))
        request.finalStatuses = []
        let reply = try await send(request)
        if reply.status == 404 { return nil }
        try check(reply)
        return try fileItem(
            path, size: reply.head["content-length"], etag: reply.head["etag"], versionID: reply.head["x-amz-version-id"],
            lastModified: reply.head["last-modified"], dateFormat: .http)
    }

    /// Whether a folder is at a path: its marker or any key below it. A folder found is
    /// remembered in ``knownFolders``.
    func folderExists(_ path: ItemPath) async throws(FileProviderError) -> Bool {
        if path.isRoot { return true }
        let prefix = key(path, folder: true)
        let listing = try await listPage(prefix: prefix, delimiter: true, token: nil, maxKeys: 1)
        let exists = !listing.objects.isEmpty || !listing.commonPrefixes.isEmpty
        if exists { knownFolders.insert(prefix) }
        return exists
    }

    /// Whether the folder a new file goes into exists, and the names of the folders in it when
    /// they are known: from ``knownFolders`` when it was seen a moment ago, else from one
    /// `ListObjectsV2` page of it (up to 1,000 entries, with `delimiter=/`: the names are known
    /// when the page holds them all), remembered for the files after it. The root always
    /// exists.
    ///
    /// - Throws: what ``listPage(prefix:delimiter:token:maxKeys:versions:)`` throws.
    func folderForNewFile(_ path: ItemPath) async throws(FileProviderError) -> (exists: Bool, subfolders: Set<String>?) {
        let folderKey = key(path, folder: true)
        if path.isRoot || knownFolders.contains(folderKey), let subfolders = knownFolders.subfolders(of: folderKey) {
            return (true, subfolders)
        }
        // Seen a moment ago without all its folders' names (more entries than one page): the
        // root too, which was listed again, a page of 1,000 keys, for every new file in it.
        if knownFolders.contains(folderKey) { return (true, nil) }
        let listing = try await listPage(prefix: folderKey, delimiter: true, token: nil)
        let exists = path.isRoot || !listing.objects.isEmpty || !listing.commonPrefixes.isEmpty
        guard exists else { return (false, nil) }
        var subfolders: Set<String>?
        if !listing.isTruncated {
            subfolders = Set(
                listing.commonPrefixes.map { common in
                    var name = String(common.utf8.dropFirst(folderKey.utf8.count)) ?? ""
                    if name.hasSuffix("/") { name.removeLast() }
                    return name
                })
        }
        knownFolders.insert(folderKey, subfolders: subfolders)
        return (true, subfolders)
    }

    /// Whether the folder new items go into exists: answered from ``knownFolders`` when it was
    /// seen a moment ago, else ``folderExists(_:)``.
    func parentExists(_ path: ItemPath) async throws(FileProviderError) -> Bool {
        if path.isRoot || knownFolders.contains(key(path, folder: true)) { return true }
        return try await folderExists(path)
    }

    /// Returns the item at an identifier: the file of its key, else the folder of its prefix.
    ///
    /// - Throws: `noSuchItem` when neither is there; `corruptData` for an impossible object.
    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        let path = try path(of: identifier)
        guard let item = try await item(at: path) else { throw .noSuchItem(identifier) }
        return item
    }

    /// The common prefixes of a listing of versions that hold a key now (a `ListObjectsV2`
    /// of one key below each, 8 at once, unless seen a moment ago: ``knownFolders``). A listing
    /// of versions also names the folders whose keys were all deleted, which are gone.
    ///
    /// - Throws: what ``listPage(prefix:delimiter:token:maxKeys:versions:)`` throws.
    func currentFolders(_ prefixes: [String]) async throws(FileProviderError) -> [String] {
        var alive = [Bool](repeating: false, count: prefixes.count)
        do {
            try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
                var next = 0
                func start() {
                    let index = next
                    let folder = prefixes[index]
                    next += 1
                    group.addTask { [self] in
                        if knownFolders.contains(folder) { return (index, true) }
                        let listing = try await listPage(prefix: folder, delimiter: true, token: nil, maxKeys: 1)
                        let exists = !listing.objects.isEmpty || !listing.commonPrefixes.isEmpty
                        if exists { knownFolders.insert(folder) }
                        return (index, exists)
                    }
                }
                while next < min(8, prefixes.count) { start() }
                while let (index, exists) = try await group.next() {
                    alive[index] = exists
                    if next < prefixes.count { start() }
                }
            }
        } catch {
            throw FileProviderError.wrap(error)
        }
        return zip(prefixes, alive).filter(\.1).map(\.0)
    }

    /// Returns one page of a folder: one `ListObjectsV2` request of up to 1,000 keys with
    /// `delimiter=/`, files from its objects and folders from its common prefixes (and marker
    /// objects), sorted by name. In a versioned bucket the request is `ListObjectVersions`, so
    /// that files carry the version ids a `HEAD` gives (``S3ContentVersion``): the current
    /// versions become files, and a common prefix becomes a folder only when a key is below it
    /// now (``currentFolders(_:)``). The folder's own marker is not an item; a name that is not
    /// safe, and a file sharing its name with a folder, go into `refused`.
    ///
    /// - Throws: `noSuchItem` when the folder does not exist (nothing at or below its prefix,
    ///   for a folder other than the root); `pageExpired` for a page this backend did not
    ///   make; what ``listPage(prefix:delimiter:token:maxKeys:)`` throws.
    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        let path = try path(of: container)
        var token: String?
        if !page.isInitial {
            let raw = String(decoding: page.rawValue, as: UTF8.self)
            guard raw.hasPrefix("t:") else { throw FileProviderError(.pageExpired, "a page this backend did not make") }
            token = String(raw.dropFirst(2))
        }
        if token == nil, !path.isRoot, try await head(path) != nil {
            throw FileProviderError(.invalidArgument, "\(path.display) is a file, not a folder")
        }
        let folderKey = key(path, folder: true)
        let listing = try await listPage(prefix: folderKey, delimiter: true, token: token, versions: versioned)
        if token == nil, !path.isRoot {
            // A listing of versions holds deleted keys too: whether the folder is, asks ListObjectsV2.
            let empty = versioned ? !(try await parentExists(path)) : listing.objects.isEmpty && listing.commonPrefixes.isEmpty
            if empty { throw .noSuchItem(container) }
        }
        var items: [Item] = []
        var refused: [RefusedItem] = []
        var folders = Set<String>()
        let commonPrefixes = versioned ? try await currentFolders(listing.commonPrefixes) : listing.commonPrefixes
        for common in commonPrefixes {
            var name = String(common.utf8.dropFirst(folderKey.utf8.count)) ?? ""
            if name.hasSuffix("/") { name.removeLast() }
            guard path.allowsChild(named: name, reservedPrefix: "\u{0}") else {
                refused.append(
                    RefusedItem(identifier: nil, filename: name, reason: "the folder name '\(name.prefix(100))' is not safe here"))
                continue
            }
            folders.insert(name)
            items.append(folderItem(path.appending(name)))
        }
        for object in listing.objects where object.isCurrentObject {
            let name = String(object.key.utf8.dropFirst(folderKey.utf8.count)) ?? ""
            if name.isEmpty { continue }  // the folder's own marker
            guard path.allowsChild(named: name, reservedPrefix: "\u{0}") else {
                refused.append(RefusedItem(identifier: nil, filename: name, reason: "the name '\(name.prefix(100))' is not safe here"))
                continue
            }
            if folders.contains(name) {
                refused.append(
                    RefusedItem(identifier: nil, filename: name, reason: "a folder of the same name hides the object '\(object.key)'"))
                continue
            }
            do throws(FileProviderError) {
                items.append(
                    try fileItem(
                        path.appending(name), size: object.size, etag: object.etag, versionID: object.versionID,
                        lastModified: object.lastModified, dateFormat: .iso8601))
            } catch {
                refused.append(RefusedItem(identifier: path.appending(name).identifier, filename: name, reason: error.message))
            }
        }
        items.sortMovingOnce(by: \.filename, ByteOrder.precedes)
        var next: Page?
        if listing.isTruncated, let token = listing.nextContinuationToken {
            let raw = Data(("t:" + token).utf8)
            guard raw.count <= Page.maximumLength else {
                throw FileProviderError(.corruptData, "the server's continuation token is longer than \(Page.maximumLength - 2) bytes")
            }
            next = Page(raw)
        }
        return ItemPage(items: items, nextPage: next, refused: refused)
    }
}
