import AdapterKit
import Foundation
import ProviderCore

extension MediaBackend {
    private static let pagePrefix = Array("media-after:".utf8)

    /// Returns one page of the items directly inside a folder, sorted by the bytes of their
    /// names.
    ///
    /// An extended server pages on its side (`after` and `limit`); a page token is the last
    /// name of the previous page, so paging stays stable while the folder changes. The original
    /// API lists a folder in one reply, so its listing is one page; its entries have no type,
    /// so a name ending in `.jpg`, `.jpeg` or `.png` is probed as a file (a ranged `GET` for its
    /// size and date; when that finds nothing the name is listed to confirm it is a folder) and
    /// any other name is a folder. Entries with unsafe names (`..`, `/`, NUL, over 255 bytes)
    /// are skipped; the others go on.
    /// - Throws: `noSuchItem` when the folder does not exist; `invalidArgument` when the
    ///   identifier is a file; `pageExpired` for a page token this backend did not make.
    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page)
        async throws(FileProviderError) -> ItemPage
    {
        let folder = try MediaPath(container)
        var after: String?
        if !page.isInitial {
            let raw = [UInt8](page.rawValue)
            guard dialect == .extended, raw.starts(with: Self.pagePrefix),
                let name = Filename.decode(raw.dropFirst(Self.pagePrefix.count))
            else {
                throw FileProviderError(.pageExpired, "the page token was not made by the media backend")
            }
            after = name
        }
        switch dialect {
        case .extended: return try await extendedPage(of: folder, after: after)
        case .original: return try await originalListing(of: folder)
        }
    }

    private func extendedPage(of folder: MediaPath, after: String?) async throws(FileProviderError) -> ItemPage {
        var query = [("path", serverPath(folder)), ("limit", String(pageSize))]
        if let after { query.append(("after", after)) }
        let reply = try await send(HTTPRequest("GET", "/media", query: query))
        if reply.status == 404 { throw .noSuchItem(folder.identifier) }
        if reply.status == 400 { throw FileProviderError(.invalidArgument, "\(folder.display) is not a folder") }
        try reply.check()
        let entries = try reply.decode([Lossy<ListingEntry>].self)
        var items: [Item] = []
        items.reserveCapacity(entries.count)
        var refused: [RefusedItem] = []
        for entry in entries {
            guard let entry = entry.value else { continue }
            switch outcome(of: entry, in: folder) {
            case .item(let item): items.append(item)
            case .skipped: break
            case .refused(let item): refused.append(item)
            }
        }
        var nextPage: Page?
        if entries.count >= pageSize, let last = entries.last(where: { $0.value != nil })?.value?.name {
            let token = Self.pagePrefix + Array(last.utf8)
            if token.count <= Page.maximumLength { nextPage = Page(Data(token)) }
        }
        return ItemPage(items: items, nextPage: nextPage, refused: refused)
    }

    /// The original API's listing of a folder: every entry's kind and a file's size and date
    /// found out one by one. A file whose probe gives an impossible size or date is refused.
    private func originalListing(of folder: MediaPath) async throws(FileProviderError) -> ItemPage {
        var request = HTTPRequest("GET", "/media", query: [("path", serverPath(folder))])
        request.finalStatuses = [500]
        let reply = try await send(request)
        if reply.status == 500 {
            // The original API's answer for a missing folder, and for a file.
            if !folder.isRoot, Self.isOriginalImageName(folder.name), try await probe(folder) != nil {
                throw FileProviderError(.invalidArgument, "\(folder.display) is not a folder")
            }
            throw FileProviderError(.noSuchItem, "no folder \(folder.display) on the server (\(reply.errorText))")
        }
        try reply.check()
        let entries = try reply.decode([Lossy<ListingEntry>].self).compactMap(\.value)
            .filter { folder.allowsChild(named: $0.name) }
        var items = [Item?](repeating: nil, count: entries.count)
        var refused: [RefusedItem] = []
        // Probe the files a few at a time: the connections bound the real concurrency.
        let width = max(1, client.settings.connections * 2)
        do {
            try await withThrowingTaskGroup(of: (Int, Item?, RefusedItem?).self) { group in
                var next = 0
                func start() {
                    let index = next
                    next += 1
                    let path = folder.appending(entries[index].name)
                    group.addTask {
                        guard Self.isOriginalImageName(path.name) else { return (index, self.originalFolder(path), nil) }
                        if let probe = try await self.probe(path) {
                            if let problem = probe.problem {
                                return (index, nil, RefusedItem(identifier: path.identifier, filename: path.name, reason: problem))
                            }
                            return (index, self.originalFile(path, probe), nil)
                        }
                        // Named like an image but not a file: a folder, or gone meanwhile.
                        return (index, try await self.originalFolderExists(path) ? self.originalFolder(path) : nil, nil)
                    }
                }
                while next < entries.count && next < width { start() }
                while let (index, item, refusal) = try await group.next() {
                    items[index] = item
                    if let refusal { refused.append(refusal) }
                    if next < entries.count { start() }
                }
            }
        } catch {
            throw FileProviderError.wrap(error)
        }
        var sorted = items.compactMap { $0 }
        sorted.sortMovingOnce(by: \.filename, ByteOrder.precedes)
        return ItemPage(items: sorted, nextPage: nil, refused: refused)
    }
}
