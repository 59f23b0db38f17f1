import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// What a one-byte ranged `GET /file` says about a file of the original API.
struct FileProbe: Sendable {
    var size: Int64
    /// `Last-Modified`, in seconds since 1970.
    var modified: Int64?
    /// What the server said that no file can have (a size or date outside ``ItemBounds``), or
    /// `nil`; such a probe never becomes an item.
    var problem: String?
}

extension MediaBackend {
    // MARK: Versions

    /// The version of an extended entry: the content part is the ETag (it changes with the
    /// bytes and survives renames); the metadata part is the modification time.
    static func extendedVersion(etag: String, modified: Int64?, kind: ItemKind) -> ItemVersion {
        var metadata = VersionBytes(tag: kind == .folder ? UInt8(ascii: "d") : UInt8(ascii: "m"))
        if kind != .folder, let modified { metadata = metadata.appending(modified) }
        return ItemVersion(content: Data(utf8: etag, tag: UInt8(ascii: "e")), metadata: metadata.data)
    }

    /// The version of a file of the original API: size and `Last-Modified` (seconds).
    static func originalVersion(_ probe: FileProbe) -> ItemVersion {
        let content = VersionBytes(tag: UInt8(ascii: "c")).appending(probe.size).appending(probe.modified ?? 0)
        return ItemVersion(content: content.data, metadata: Data("c".utf8))
    }

    /// Folders of the original API have no version the server tells; this one never changes.
    static let originalFolderVersion = ItemVersion(content: Data("cd".utf8), metadata: Data("cd".utf8))

    /// The ETag a content version was made from, for `If-Match`; `nil` for versions of the
    /// original API.
    static func etag(of version: ItemVersion) -> String? {
        guard version.content.first == UInt8(ascii: "e") else { return nil }
        return String(decoding: version.content.dropFirst(), as: UTF8.self)
    }

    static func date(nanoseconds: Int64?) -> Date? {
        nanoseconds.map { Date(timeIntervalSince1970: Double($0) / 1e9) }
    }

    // MARK: Items

    /// What an extended listing entry becomes.
    enum EntryOutcome {
        case item(Item)
        /// Left out without a word: an unsafe name (the engine never sees those), an entry
        /// not typed as a file or folder, or without an ETag.
        case skipped
        /// Left out because the server sent an impossible number for it (see ``ItemBounds``).
        case refused(RefusedItem)
    }

    /// The item of an extended listing entry in `folder`. The entry's numbers are checked
    /// here, where they enter: a size (of a file) that is not an integer, is negative or over
    /// ``ItemBounds/maximumSize``, and a modification time outside ``ItemBounds``, refuse it.
    func outcome(of entry: ListingEntry, in folder: MediaPath) -> EntryOutcome {
        guard folder.allowsChild(named: entry.name) else { return .skipped }
        let kind: ItemKind
        switch entry.type {
        case "file": kind = .file
        case "folder": kind = .folder
        default: return .skipped
        }
        guard let etag = entry.etag, !etag.isEmpty else { return .skipped }
        let path = folder.appending(entry.name)
        func refuse(_ reason: String) -> EntryOutcome {
            .refused(RefusedItem(identifier: path.identifier, filename: entry.name, reason: reason))
        }
        var size: Int64 = 0
        if kind == .file {
            guard let value = entry.size.value else {
                return refuse("its size \(entry.size.text) is not a whole number of bytes up to \(ItemBounds.maximumSize)")
            }
            if let problem = ItemBounds.problem(withSize: value) { return refuse(problem) }
            size = value
        }
        var modified: Int64?
        if let sent = entry.modified {
            guard let value = sent.value else {
                return refuse("its modification time \(sent.text) is not a whole number of nanoseconds since 1970 between 1700 and 2200")
            }
            if let problem = ItemBounds.problem(withNanoseconds: value, "modification date") { return refuse(problem) }
            modified = value
        }
        return .item(
            Item(
                identifier: path.identifier, parentIdentifier: folder.identifier, filename: entry.name, kind: kind,
                size: size, contentModificationDate: Self.date(nanoseconds: modified),
                version: Self.extendedVersion(etag: etag, modified: modified, kind: kind)))
    }

    /// An item from an extended listing entry in `folder`; `nil` when the name is unsafe or the
    /// entry is not typed as a file or folder.
    ///
    /// - Throws: `corruptData` naming the item when the server sent an impossible number for
    ///   it (see ``outcome(of:in:)``).
    func makeItem(_ entry: ListingEntry, in folder: MediaPath) throws(FileProviderError) -> Item? {
        switch outcome(of: entry, in: folder) {
        case .item(let item): return item
        case .skipped: return nil
        case .refused(let refused):
            throw FileProviderError(
                .corruptData, "\(folder.appending(entry.name).display): \(refused.reason); the server sent an impossible value")
        }
    }

    func originalFile(_ path: MediaPath, _ probe: FileProbe) -> Item {
        Item(
            identifier: path.identifier, parentIdentifier: path.parent.identifier, filename: path.name, kind: .file,
            size: probe.size, contentModificationDate: probe.modified.map { Date(timeIntervalSince1970: Double($0)) },
            version: Self.originalVersion(probe))
    }

    func originalFolder(_ path: MediaPath) -> Item {
        Item(
            identifier: path.identifier, parentIdentifier: path.parent.identifier, filename: path.name, kind: .folder,
            version: Self.originalFolderVersion)
    }

    /// The root folder, after checking the server has it.
    ///
    /// - Throws: `noSuchItem` when the domain's root folder is not on the server.
    func rootItem() async throws(FileProviderError) -> Item {
        let name = rootComponents.last ?? "media"
        switch dialect {
        case .extended:
            let reply = try await send(HTTPRequest("GET", "/stat", query: [("path", serverPath(.root))]))
            if reply.status == 404 {
                throw FileProviderError(.noSuchItem, "the folder '\(serverPath(.root))' does not exist on \(baseURL)")
            }
            try reply.check()
            let entry = try reply.decode(ListingEntry.self)
            // The root is never refused: a date it cannot have is left out.
            let modified = entry.modified?.value.flatMap { ItemBounds.problem(withNanoseconds: $0, "") == nil ? $0 : nil }
            return Item(
                identifier: .rootContainer, parentIdentifier: .rootContainer, filename: name, kind: .folder,
                contentModificationDate: Self.date(nanoseconds: modified),
                version: Self.extendedVersion(etag: entry.etag ?? "root", modified: nil, kind: .folder))
        case .original:
            guard try await originalFolderExists(.root) else {
                throw FileProviderError(.noSuchItem, "the folder '\(serverPath(.root))' does not exist on \(baseURL)")
            }
            return Item(
                identifier: .rootContainer, parentIdentifier: .rootContainer, filename: name, kind: .folder,
                version: Self.originalFolderVersion)
        }
    }

    // MARK: The original API

    /// Whether a name is one the original API lists as a file (case-sensitive, as it does).
    static func isOriginalImageName(_ name: String) -> Bool {
        [".jpg", ".jpeg", ".png"].contains { name.utf8.count > $0.utf8.count && name.hasSuffix($0) }
    }

    /// Whether `GET /media` lists the folder (the original API answers `500` for a missing one).
    func originalFolderExists(_ path: MediaPath) async throws(FileProviderError) -> Bool {
        var request = HTTPRequest("GET", "/media", query: [("path", serverPath(path))])
        request.finalStatuses = [500]
        let reply = try await send(request)
        if reply.status == 500 { return false }
        try reply.check()
        return true
    }

    /// Size and `Last-Modified` of a file from a one-byte ranged `GET /file`; `nil` when the
    /// server has no file there (`404`).
    ///
    /// The server's numbers are checked here: an impossible size or date is noted in the
    /// probe's `problem`.
    /// - Throws: `corruptData` when the server gave no size.
    func probe(_ path: MediaPath) async throws(FileProviderError) -> FileProbe? {
        var request = HTTPRequest("GET", "/file", query: itemQuery(path))
        request.headers = ["Range: bytes=0-0"]
        request.sink = .memory(limit: 1 << 16)
        let reply = try await send(request)
        switch reply.status {
        case 200, 206, 416:
            let size: Int64?
            do {
                size = try reply.head.resourceSize(of: "")
            } catch {
                return FileProbe(size: 0, problem: "its size \(reply.head.announcedSize) is not a possible size")
            }
            guard let size else { throw FileProviderError(.corruptData, "the server gave no size for \(path.display)") }
            let modified = reply.head["last-modified"].flatMap(Self.parseHTTPDate)
            let problem = modified.flatMap { ItemBounds.problem(withSeconds: $0, "modification date (Last-Modified)") }
            return FileProbe(size: size, modified: problem == nil ? modified : nil, problem: problem)
        case 404:
            return nil
        default:
            try reply.check()
            throw FileProviderError(.corruptData, "GET /file answered \(reply.status) for \(path.display)")
        }
    }

    /// The item at a path of the original API: a file when a ranged `GET /file` finds one, a
    /// folder when `GET /media` lists it.
    ///
    /// - Throws: `noSuchItem` when it is neither, or a file the API does not list;
    ///   `corruptData` for a file the server gave an impossible size or date.
    func originalItem(at path: MediaPath) async throws(FileProviderError) -> Item {
        if Self.isOriginalImageName(path.name), let probe = try await probe(path) {
            if let problem = probe.problem {
                throw FileProviderError(.corruptData, "\(path.display): \(problem); the server sent an impossible value")
            }
            return originalFile(path, probe)
        }
        if try await originalFolderExists(path) { return originalFolder(path) }
        throw .noSuchItem(path.identifier)
    }

    /// An HTTP date (`Sat, 21 Nov 2026 12:45:54 GMT`) as seconds since 1970.
    static func parseHTTPDate(_ text: String) -> Int64? {
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let parts = text.split(separator: " ")
        // Each field within its range, so nothing below can overflow.
        guard parts.count == 6, parts[5] == "GMT", let day = Int32(parts[1]), (1...31).contains(day),
            let month = months.firstIndex(of: String(parts[2])), let year = Int32(parts[3]), (1...9999).contains(year)
        else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int32($0) }
        guard clock.count == 3, (0...23).contains(clock[0]), (0...59).contains(clock[1]), (0...60).contains(clock[2])
        else { return nil }
        var fields = tm()
        fields.tm_year = year - 1900
        fields.tm_mon = Int32(month)
        fields.tm_mday = day
        fields.tm_hour = clock[0]
        fields.tm_min = clock[1]
        fields.tm_sec = clock[2]
        return Int64(timegm(&fields))
    }
}
