import AdapterKit
import Foundation
import ProviderCore

extension WebDAVBackend {
    /// The version of every folder: WebDAV gives a folder's ETag no meaning the engine can use
    /// (Apache changes it with every child), and a folder has no contents to download.
    static let folderVersion = ItemVersion(content: Data("folder".utf8), metadata: Data())

    /// The ETag of a content version, in its strong form with quotes (`"3-5f1c"`), or `nil`
    /// for a stamp (``DAVVersion/stamp(_:size:)``) or a version this backend did not make.
    ///
    /// A version holds the entity tag without a weak `W/` prefix: Apache marks the ETag of a
    /// file changed within the last second weak and makes it strong, with the same value, a
    /// second later, and that is the same contents.
    static func etag(of version: ItemVersion) -> String? {
        guard case .etag(let quoted) = DAVVersion(version.content) else { return nil }
        return quoted
    }

    /// Whether a content version is a stamp: the server gives no ETag, the adapter checks the
    /// version itself before a write.
    static func isStamp(_ version: ItemVersion) -> Bool { DAVVersion(version.content)?.isStamp == true }

    /// The longest multistatus reply a listing takes, in bytes: far more than a folder of
    /// ``ProviderCore/ItemBounds/maximumEntriesPerFolder`` entries needs; it goes to a file,
    /// never into memory.
    static let maximumListingReply: Int64 = 1 << 30

    /// Where listing replies are spooled: the temporary folder, looked up once.
    static let spoolFolder = FileManager.default.temporaryDirectory.path

    /// The longest reply to a `PROPFIND` with `Depth: 0` (one entry), held in memory.
    static let maximumItemReply = 1 << 20

    /// The longest reply parsed on the task's own thread instead of the parser's: one item's
    /// is about 600 bytes (libxml2 reads it in about 20 µs).
    static let inlineParseLimit = 16 << 10

    /// `PROPFIND` with `Depth` 0 or 1 on a path; `nil` when nothing is there (`404`).
    ///
    /// A listing's reply (`Depth: 1`) is spooled into a temporary file (removed again at once)
    /// and parsed from it in chunks, so memory does not grow with the length of the reply, only
    /// with its entries; a single item's (`Depth: 0`) is read in memory, up to
    /// ``maximumItemReply`` bytes.
    ///
    /// - Throws: `invalidArgument` for a listing of a file the server refuses with `403`
    ///   (lighttpd); `corruptData` when the reply is not a multistatus body this adapter can read
    ///   or is longer than its limit; `localIOFailure` when the temporary file cannot be
    ///   written; what ``AdapterKit/HTTPReply/check()`` throws for other statuses.
    func propfind(_ path: ItemPath, depth: Int) async throws(FileProviderError) -> [DAVResponse]? {
        var request = HTTPRequest("PROPFIND", endpoint(path, collection: depth > 0))
        request.headers = ["Depth: \(depth)"]
        request.body = .data(
            propfindBody(fileIDs: vendor.hasFileIDs, quota: path.isRoot), contentType: "application/xml; charset=utf-8")
        let spooled = depth > 0
        // Named only for a listing (a URL and a UUID per request were a sixth of the
        // cooperative threads' CPU of 10,000 uploads, each checked with a `PROPFIND`).
        let spool = spooled ? Self.spoolFolder + "/.webdav-propfind-" + String(UInt64.random(in: .min ... .max), radix: 16) : ""
        defer { if spooled { try? FileManager.default.removeItem(atPath: spool) } }
        request.sink = spooled ? .spool(path: spool, limit: Self.maximumListingReply) : .memory(limit: Self.maximumItemReply)
        let reply = try await send(request)
        if reply.status == 404 { return nil }
        if reply.status == 403, depth > 0, let one = try await propfind(path, depth: 0), one.first?.isCollection == false {
            // lighttpd answers 403 to a listing of a file (its URL ends in `/`).
            throw FileProviderError(.invalidArgument, "\(path.display) is not a folder")
        }
        try reply.check()
        guard reply.status == 207 else {
            throw FileProviderError(.corruptData, "PROPFIND \(path.display): the server answered \(reply.status), not 207 Multi-Status")
        }
        if spooled { listingMemory.record(reply: reply) }
        let limit = ItemBounds.maximumEntriesPerFolder + 1
        let reads = listingMemory.reads
        let body = reply.body
        let parse: @Sendable () throws -> Result<[DAVResponse], MultistatusError> = {
            do {
                if !spooled { return .success(try MultistatusParser.parse(body, limit: limit)) }
                return .success(try MultistatusParser.parse(file: spool, limit: limit, reads: reads))
            } catch let error as MultistatusError {
                return .failure(error)
            }
        }
        // A short reply in memory (one item's, after each upload) is parsed where it arrived:
        // tens of microseconds of work, less than the parser thread's two wake-ups cost.
        let parsed: Result<[DAVResponse], MultistatusError>
        if !spooled && body.count <= Self.inlineParseLimit {
            do { parsed = try parse() } catch { throw FileProviderError.wrap(error) }
        } else {
            parsed = try await parser.run(parse)
        }
        switch parsed {
        case .success(let responses): return responses
        case .failure(let error):
            if error.message.hasPrefix("more than") { throw ItemBounds.tooManyEntries(in: path.display) }
            throw FileProviderError(.corruptData, "PROPFIND \(path.display): \(error.message)")
        }
    }

    /// Where a response's href is: the path inside the root, or `nil` when it is outside it or
    /// does not decode.
    func relativePath(of href: String) -> [String]? {
        var text = Substring(href)
        if let schemeEnd = Self.endOfScheme(in: text) {
            // An absolute URL: keep its path.
            let rest = text[schemeEnd...]
            text = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        // Most hrefs start with the root's path as the requests spell it: only what follows is
        // decoded (every entry of a listing comes here). Any other spelling is decoded whole.
        let utf8 = text.utf8
        if utf8.starts(with: encodedBasePath) {
            let end = utf8.index(utf8.startIndex, offsetBy: encodedBasePath.count)
            if end == utf8.endIndex || utf8[end] == UInt8(ascii: "/") { return Self.decodePath(text[end...]) }
        }
        guard let names = Self.decodePath(text), names.count >= basePath.count,
            zip(names, basePath).allSatisfy({ $0.utf8.elementsEqual($1.utf8) })
        else { return nil }
        return Array(names.dropFirst(basePath.count))
    }

    /// Where the host of an absolute URL starts (after its first `://`), or `nil` for a path.
    static func endOfScheme(in text: Substring) -> Substring.Index? {
        let utf8 = text.utf8
        var index = utf8.startIndex
        while index < utf8.endIndex {
            if utf8[index] == UInt8(ascii: ":") {
                let first = utf8.index(after: index)
                if first < utf8.endIndex, utf8[first] == UInt8(ascii: "/") {
                    let second = utf8.index(after: first)
                    if second < utf8.endIndex, utf8[second] == UInt8(ascii: "/") { return utf8.index(after: second) }
                }
            }
            index = utf8.index(after: index)
        }
        return nil
    }

    /// What becomes of a response in a listing of `folder`.
    enum Outcome {
        case item(Item)
        case refused(RefusedItem)
        /// Not a child of the folder (the folder itself, or an href elsewhere).
        case skipped
    }

    /// Checks a response's name and values and makes its item; an unsafe name or an
    /// impossible number refuses it.
    /// `names`: the response's href's names inside the root (``relativePath(of:)``), read once
    /// by the caller.
    func outcome(
        of response: DAVResponse, at names: [String]?, in folder: ItemPath, identifier folderIdentifier: ItemIdentifier
    ) -> Outcome {
        guard let names else {
            let shown = String(response.href.prefix(200))
            return .refused(
                RefusedItem(identifier: nil, filename: shown, reason: "its href \(shown.debugDescription) is not inside \(baseURL)"))
        }
        guard names.count == folder.components.count + 1,
            zip(names, folder.components).allSatisfy({ $0.utf8.elementsEqual($1.utf8) })
        else { return .skipped }
        let name = names[names.count - 1]
        guard Filename.isValid(name), !(folder.isRoot && ItemPath.reservedNames.contains(name)) else {
            return .refused(
                RefusedItem(identifier: nil, filename: String(name.prefix(255)), reason: "unsafe name \(name.prefix(255).debugDescription)")
            )
        }
        let path = folder.appending(name)
        let made = identifier(of: response, at: path).flatMap { identifier in
            makeItem(response, at: path, identifier: identifier, parent: folderIdentifier)
        }
        switch made {
        case .success(let item):
            if vendor.hasFileIDs { places.remember(item.identifier, at: path) }
            return .item(item)
        case .failure(let refusal): return .refused(RefusedItem(identifier: nil, filename: name, reason: refusal.reason))
        }
    }

    /// The identifier of the item a response describes at `path`: with a vendor that has
    /// stable identifiers, `fileid-<oc:fileid>` (1 to 20 decimal digits, else refused), else
    /// the path.
    func identifier(of response: DAVResponse, at path: ItemPath) -> Result<ItemIdentifier, Refusal> {
        if path.isRoot { return .success(.rootContainer) }
        guard vendor.hasFileIDs else { return .success(path.identifier) }
        guard let id = response.fileID, (1...20).contains(id.utf8.count), id.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            let shown = (response.fileID ?? "none").prefix(40)
            return .failure(Refusal(reason: "its oc:fileid \(shown.debugDescription) is not a number of at most 20 digits"))
        }
        return .success(ItemIdentifier(Self.fileIDPrefix + id))
    }

    static let fileIDPrefix = "fileid-"

    struct Refusal: Error { var reason: String }

    /// The item a response describes at `path`, after checking its values.
    ///
    /// `identifier` and `parent` default to the ones derived from the path. A file's content
    /// version is its ETag (``EntityTag``) or, where the server gave none, its stamp
    /// (``DAVVersion/stamp(_:size:)``: `getlastmodified` and `getcontentlength`). `form` is
    /// `nil` for a `PROPFIND` response, which takes the form its values give and records it
    /// (``versionForms``); a `GET` reply's head is given the form the listings have, so that
    /// both describe one version alike.
    func makeItem(
        _ response: DAVResponse, at path: ItemPath, identifier: ItemIdentifier? = nil, parent: ItemIdentifier? = nil,
        form: VersionForms.Form? = nil
    )
        -> Result<Item, Refusal>
    {
        var modified: Date?
        if let text = response.lastModified, !text.isEmpty {
            guard let date = Self.httpDate(text) else {
                return .failure(Refusal(reason: "its date \(text.prefix(60).debugDescription) is not an HTTP date"))
            }
            if let problem = ItemBounds.problem(withDate: date, "modification date") { return .failure(Refusal(reason: problem)) }
            modified = date
        }
        var created: Date?
        if let text = response.creationDate, !text.isEmpty, let date = Self.isoDate(text) {
            // An unreadable or impossible creation date is left out: nothing depends on it.
            created = ItemBounds.problem(withDate: date, "creation date") == nil ? date : nil
        }
        let identifier = path.isRoot ? ItemIdentifier.rootContainer : (identifier ?? path.identifier)
        let parent = path.isRoot ? ItemIdentifier.rootContainer : (parent ?? path.parent.identifier)
        let name = path.isRoot ? (basePath.last ?? "webdav") : path.name
        if response.isCollection {
            return .success(
                Item(
                    identifier: identifier, parentIdentifier: parent, filename: name, kind: .folder, creationDate: created,
                    contentModificationDate: modified, version: Self.folderVersion))
        }
        guard let lengthText = response.contentLength else { return .failure(Refusal(reason: "the server gave no size")) }
        guard let size = Int64(lengthText) else {
            return .failure(Refusal(reason: "its size \(lengthText.prefix(40).debugDescription) is not a number"))
        }
        if let problem = ItemBounds.problem(withSize: size) { return .failure(Refusal(reason: problem)) }
        let version: DAVVersion
        switch (EntityTag.parse(response.etag), form) {
        case (.invalid(let reason), nil), (.invalid(let reason), .etag): return .failure(Refusal(reason: reason))
        case (.tag(let tag), nil), (.tag(let tag), .etag):
            if form == nil { versionForms.record(.etag) }
            version = .etag(tag.quoted)
        case (.none, .etag): return .failure(Refusal(reason: "the server gave no ETag (its listings do)"))
        case (_, nil), (_, .stamp):
            guard let modified else {
                return .failure(Refusal(reason: "the server gave neither an ETag nor a modification date"))
            }
            if form == nil { versionForms.record(.stamp) }
            version = DAVVersion.stamp(modified, size: size)
        }
        var contentType: String?
        if let type = response.contentType, type.utf8.count <= 200 { contentType = type }
        return .success(
            Item(
                identifier: identifier, parentIdentifier: parent, filename: name, kind: .file, contentType: contentType,
                size: size, creationDate: created, contentModificationDate: modified,
                version: ItemVersion(content: version.content, metadata: Data(utf8: response.lastModified ?? "", limit: 64))))
    }

    /// The root collection.
    ///
    /// - Throws: `noSuchItem` when nothing is at the URL; `invalidArgument` when it is not a
    ///   collection.
    func rootItem() async throws(FileProviderError) -> Item {
        guard let responses = try await propfind(.root, depth: 0) else {
            throw FileProviderError(.noSuchItem, "nothing is at \(baseURL) on the server")
        }
        guard let response = responses.first(where: { relativePath(of: $0.href) == [] }) ?? responses.first,
            response.isCollection
        else {
            throw FileProviderError(.invalidArgument, "\(baseURL) is not a WebDAV collection")
        }
        if let quota = response.quotaAvailable { updateQuota(quota) }
        // The root is never refused: a date it cannot have is left out.
        var clean = response
        if case .failure = makeItem(clean, at: .root) { clean.lastModified = nil }
        return (try? makeItem(clean, at: .root).get())
            ?? Item(
                identifier: .rootContainer, parentIdentifier: .rootContainer, filename: basePath.last ?? "webdav", kind: .folder,
                version: Self.folderVersion)
    }

    /// Returns the current metadata of one item (`PROPFIND` with `Depth: 0`).
    ///
    /// With stable identifiers, an item not at its last known place is looked for again
    /// (``resolve(_:)``).
    /// - Throws: `noSuchItem` when nothing is at the identifier's path (or, with stable
    ///   identifiers, nowhere in the tree); `corruptData` when the server describes it with an
    ///   impossible value.
    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        var path = try await resolve(identifier)
        if path.isRoot { return try await rootItem() }
        if let item = try await item(at: path), item.identifier == identifier { return item }
        guard vendor.hasFileIDs else { throw .noSuchItem(identifier) }
        // Moved or deleted on the server since it was last seen: look for it again.
        places.forget(below: path)
        path = try await resolve(identifier)
        if let item = try await item(at: path), item.identifier == identifier { return item }
        throw .noSuchItem(identifier)
    }

    /// The item at `path` (`PROPFIND` with `Depth: 0`), or `nil` when nothing is there.
    ///
    /// - Throws: `corruptData` when the server describes it with an impossible value (or, with
    ///   stable identifiers, without a usable `oc:fileid`); what ``parentIdentifier(of:)``
    ///   throws.
    func item(at path: ItemPath) async throws(FileProviderError) -> Item? {
        if path.isRoot { return try await rootItem() }
        guard let responses = try await propfind(path, depth: 0) else { return nil }
        guard let response = responses.first(where: { relativePath(of: $0.href)?.last == path.name }) ?? responses.first else {
            throw FileProviderError(.corruptData, "PROPFIND \(path.display) described nothing")
        }
        let parent = try await parentIdentifier(of: path)
        let made = identifier(of: response, at: path).flatMap { identifier in
            makeItem(response, at: path, identifier: identifier, parent: parent)
        }
        switch made {
        case .success(let item):
            if vendor.hasFileIDs { places.remember(item.identifier, at: path) }
            return item
        case .failure(let refusal):
            throw FileProviderError(.corruptData, "\(path.display): \(refusal.reason); the server sent an impossible value")
        }
    }

    /// The identifier of the folder `path` is in: derived from the path, or with stable
    /// identifiers its `oc:fileid` (known, or asked with `PROPFIND`).
    ///
    /// - Throws: `noSuchItem` when the folder is gone; `corruptData` when it has no usable
    ///   `oc:fileid`.
    func parentIdentifier(of path: ItemPath) async throws(FileProviderError) -> ItemIdentifier {
        let parent = path.parent
        if parent.isRoot { return .rootContainer }
        guard vendor.hasFileIDs else { return parent.identifier }
        if let known = places.identifier(at: parent) { return known }
        guard let responses = try await propfind(parent, depth: 0), let response = responses.first else {
            throw FileProviderError(.noSuchItem, "the folder \(parent.display) is gone")
        }
        switch identifier(of: response, at: parent) {
        case .success(let identifier):
            places.remember(identifier, at: parent)
            return identifier
        case .failure(let refusal): throw FileProviderError(.corruptData, "\(parent.display): \(refusal.reason)")
        }
    }

    /// The path of an identifier: the identifier itself when identifiers are paths; with
    /// stable identifiers, the item's last known place, else found by a walk of the tree
    /// (``find(_:)``).
    ///
    /// - Throws: `noSuchItem` for an identifier this backend did not make, or one found nowhere.
    func resolve(_ identifier: ItemIdentifier) async throws(FileProviderError) -> ItemPath {
        guard vendor.hasFileIDs else { return try ItemPath(identifier) }
        if identifier == .rootContainer { return .root }
        guard identifier.rawValue.hasPrefix(Self.fileIDPrefix) else { throw .noSuchItem(identifier) }
        if let path = places.path(of: identifier) { return path }
        return try await find(identifier)
    }

    /// The most folders a walk in search of an identifier lists.
    static let walkLimit = 100_000

    /// Lists the tree breadth-first from the root (recording where each item is) until
    /// `identifier` is seen.
    ///
    /// - Throws: `noSuchItem` when it is nowhere (or not within ``walkLimit`` folders).
    func find(_ identifier: ItemIdentifier) async throws(FileProviderError) -> ItemPath {
        var queue: [ItemPath] = [.root]
        var next = 0
        while next < queue.count && next < Self.walkLimit {
            let folder = queue[next]
            next += 1
            guard let responses = try await propfind(folder, depth: 1) else { continue }
            for response in responses {
                guard let names = relativePath(of: response.href), names.count == folder.components.count + 1,
                    zip(names, folder.components).allSatisfy({ $0.utf8.elementsEqual($1.utf8) }),
                    let name = names.last, Filename.isValid(name)
                else { continue }
                let path = folder.appending(name)
                guard case .success(let found) = self.identifier(of: response, at: path) else { continue }
                places.remember(found, at: path)
                if response.isCollection { queue.append(path) }
            }
            if let path = places.path(of: identifier) { return path }
        }
        throw .noSuchItem(identifier)
    }

    /// Returns the items directly inside a folder in one page (`PROPFIND` with `Depth: 1`),
    /// sorted by the bytes of their names. Entries with unsafe names (`..`, `/`, NUL, over 255
    /// bytes, not UTF-8), impossible values or (with stable identifiers) no usable or a
    /// repeated `oc:fileid` are refused; the others go on.
    ///
    /// - Throws: `noSuchItem` when the folder does not exist; `invalidArgument` when the
    ///   identifier is a file; `pageExpired` for a page other than the first; `corruptData` for
    ///   a reply that is not a multistatus body, or one past ``ProviderCore/ItemBounds/maximumEntriesPerFolder``.
    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page)
        async throws(FileProviderError) -> ItemPage
    {
        if !page.isInitial { throw FileProviderError(.pageExpired, "a WebDAV listing is one page") }
        var folder = try await resolve(container)
        if let page = try await list(folder, as: container) { return page }
        guard vendor.hasFileIDs, container != .rootContainer else { throw .noSuchItem(container) }
        // Moved or deleted on the server since it was last seen: look for it again.
        places.forget(below: folder)
        folder = try await resolve(container)
        if let page = try await list(folder, as: container) { return page }
        throw .noSuchItem(container)
    }

    /// The listing of `folder`, whose identifier is `container`; `nil` when nothing is there
    /// (or, with stable identifiers, another folder is).
    private func list(_ folder: ItemPath, as container: ItemIdentifier) async throws(FileProviderError) -> ItemPage? {
        guard let responses = try await propfind(folder, depth: 1) else { return nil }
        var items: [Item] = []
        items.reserveCapacity(responses.count)
        var refused: [RefusedItem] = []
        var seen = Set<ItemIdentifier>()
        var sawSelf = false
        for response in responses {
            let names = relativePath(of: response.href)
            if let names, names.count == folder.components.count,
                zip(names, folder.components).allSatisfy({ $0.utf8.elementsEqual($1.utf8) })
            {
                sawSelf = true
                if !response.isCollection { throw FileProviderError(.invalidArgument, "\(folder.display) is not a folder") }
                if vendor.hasFileIDs, !folder.isRoot, case .success(let found) = identifier(of: response, at: folder),
                    found != container
                {
                    return nil
                }
                if folder.isRoot, let quota = response.quotaAvailable { updateQuota(quota) }
                continue
            }
            switch outcome(of: response, at: names, in: folder, identifier: container) {
            case .item(let item):
                if seen.insert(item.identifier).inserted {
                    items.append(item)
                } else {
                    refused.append(
                        RefusedItem(identifier: nil, filename: item.filename, reason: "its oc:fileid is another entry's too"))
                }
            case .refused(let item): refused.append(item)
            case .skipped: break
            }
        }
        if !sawSelf, responses.count == 1, !(responses[0].isCollection) {
            throw FileProviderError(.invalidArgument, "\(folder.display) is not a folder")
        }
        Self.sortByName(&items)
        return ItemPage(items: items, nextPage: nil, refused: refused)
    }

    /// Sorts `items` by the bytes of their names, each moved once (a sort of the items
    /// themselves moved them at every step).
    static func sortByName(_ items: inout [Item]) {
        items.sortMovingOnce(by: \.filename, ByteOrder.precedes)
    }

    // MARK: Values

    /// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
    static func httpDate(_ text: String) -> Date? {
        if let date = HTTPDate.rfc1123(HTTPText.trimmed(text)) { return date }
        // Another zone than GMT, or another form: the formatter (slow to make; seldom needed).
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text.trimmingCharacters(in: .whitespaces))
    }

    /// An RFC 3339 date (`creationdate`).
    static func isoDate(_ text: String) -> Date? {
        if let date = HTTPDate.rfc3339(text[...]) { return date }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
