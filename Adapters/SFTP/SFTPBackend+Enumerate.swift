import Foundation
import ProviderCore

extension SFTPBackend {
    private static let pagePrefix = Array("sftp-after:".utf8)

    /// Returns one page of the items directly inside a folder, sorted by the bytes of their
    /// names.
    ///
    /// A page token is the last name of the previous page, so paging stays stable while the
    /// folder changes. Names that are not UTF-8 or not safe, the backend's staging files, and
    /// sockets, FIFOs and devices are skipped.
    /// - Throws: `noSuchItem` when the folder does not exist or is reached through a symlink;
    ///   `invalidArgument` when the identifier is not a folder; `pageExpired` for a page token
    ///   this backend did not make.
    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page)
        async throws(FileProviderError) -> ItemPage
    {
        let path = try SFTPPath(container)
        let after: [UInt8]?
        if page.isInitial {
            after = nil
        } else {
            let raw = [UInt8](page.rawValue)
            guard raw.starts(with: Self.pagePrefix) else {
                throw FileProviderError(.pageExpired, "the page token was not made by the sftp backend")
            }
            after = Array(raw.dropFirst(Self.pagePrefix.count))
        }
        return try await withConnection { connection throws(FileProviderError) -> ItemPage in
            try self.listPage(of: path, after: after, on: connection)
        }
    }

    private func listPage(of path: SFTPPath, after: [UInt8]?, on connection: SFTPConnection)
        throws(FileProviderError) -> ItemPage
    {
        let remote = try folderToList(path, on: connection)
        let entries: [SFTPListing.Entry]
        if after != nil, let cached = listings.listing(for: remote) {
            entries = cached
        } else {
            entries = try readFolder(remote, path: path, on: connection)
            if entries.count > pageSize { listings.store(entries, for: remote) } else { listings.remove(remote) }
        }
        var index = after.map { SFTPListing.firstIndex(in: entries, after: $0) } ?? 0
        var items: [Item] = []
        items.reserveCapacity(min(pageSize, entries.count - index))
        var lastName: String?
        while index < entries.count && items.count < pageSize {
            let entry = entries[index]
            index += 1
            lastName = entry.name
            let child = path.appending(entry.name)
            do throws(FileProviderError) {
                guard let item = try makeItem(path: child, attributes: entry.attributes, on: connection) else { continue }
                items.append(item)
            } catch where error.code == .noSuchItem {
                continue  // removed while listing
            }
        }
        let nextPage = index < entries.count ? lastName.map { Page(Data(Self.pagePrefix + Array($0.utf8))) } : nil
        return ItemPage(items: items, nextPage: nextPage)
    }

    /// Every safe entry of a folder, sorted by name.
    func readFolder(_ remote: String, path: SFTPPath, on connection: SFTPConnection) throws(FileProviderError)
        -> [SFTPListing.Entry]
    {
        let directory: SFTPFile
        do {
            directory = try connection.openDirectory(remote)
        } catch where error.code != .serverUnreachable {
            // Only now ask why (a listing normally needs no stat of the folder). A dead
            // connection is left alone: the pool replaces it.
            if let attributes = try? connection.lstat(remote), attributes.kind != .folder {
                throw FileProviderError(.invalidArgument, "\(path.display) is not a folder")
            }
            throw error
        }
        var raw: [(name: [UInt8], attributes: RemoteAttributes)] = []
        while let entry = try directory.nextEntry() { raw.append(entry) }
        try? directory.close()
        return SFTPListing.decode(raw, in: path)
    }
}
