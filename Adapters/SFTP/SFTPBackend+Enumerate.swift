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
        return try await withConnection(operation: "READDIR", path: path) { connection throws(FileProviderError) -> ItemPage in
            try self.listPage(of: path, after: after, on: connection)
        }
    }

    private func listPage(of path: SFTPPath, after: [UInt8]?, on connection: SFTPConnection)
        throws(FileProviderError) -> ItemPage
    {
        let remote = path.remote(under: connection.rootPath)
        let entries: [SFTPListing.Entry]
        if after != nil, let cached = listings.listing(for: remote) {
            try verifyFolder(path, on: connection)
            entries = cached
        } else {
            entries = try readFolder(path, on: connection)
            if entries.count > pageSize { listings.store(entries, for: remote) } else { listings.remove(remote) }
        }
        var index = after.map { SFTPListing.firstIndex(in: entries, after: $0) } ?? 0
        var items: [Item] = []
        items.reserveCapacity(min(pageSize, entries.count - index))
        var refused: [RefusedItem] = []
        var lastName: String?
        while index < entries.count && items.count < pageSize {
            let entry = entries[index]
            index += 1
            lastName = entry.name
            let child = path.appending(entry.name)
            if let kind = entry.attributes.kind, let problem = entry.attributes.problem(for: kind) {
                refused.append(RefusedItem(identifier: child.identifier, filename: entry.name, reason: problem))
                continue
            }
            do throws(FileProviderError) {
                guard let item = try makeItem(path: child, attributes: entry.attributes, on: connection) else { continue }
                items.append(item)
            } catch where error.code == .noSuchItem {
                continue  // removed while listing
            }
        }
        let nextPage = index < entries.count ? lastName.map { Page(Data(Self.pagePrefix + Array($0.utf8))) } : nil
        return ItemPage(items: items, nextPage: nextPage, refused: refused)
    }

    /// Every safe entry of a folder, sorted by name, read only when the folder is reached
    /// without passing a symlink (its real path is the path asked for).
    ///
    /// On the connection's second SFTP channel this takes two round trips for a folder of up to
    /// 400 entries (see ``SFTPChannel``); without one, libssh2 asks for the real path, opens the
    /// folder, reads 100 names a round trip and closes it: six round trips for 102 entries.
    /// - Throws: `noSuchItem` when the folder does not exist or is reached through a symlink;
    ///   `invalidArgument` when it is not a folder; `permissionDenied`; `serverUnreachable`.
    func readFolder(_ path: SFTPPath, on connection: SFTPConnection) throws(FileProviderError) -> [SFTPListing.Entry] {
        let remote = path.remote(under: connection.rootPath)
        guard let channel = try connection.extensionChannel() else {
            try verifyFolder(path, on: connection)
            return listing(try readFolderWithLibSSH2(remote, path: path, on: connection), of: path, at: remote, on: connection)
        }
        let opened = try channel.openFolder(remote, resolving: !path.isRoot, on: connection)
        defer { if case .success(let handle) = opened.handle { channel.closeWithoutWaiting(handle, on: connection) } }
        if let resolved = opened.resolved, try !resolved.get().elementsEqual(remote.utf8) {
            throw symlinkRefused(path)
        }
        let handle: [UInt8]
        switch opened.handle {
        case .success(let value): handle = value
        case .failure(let error): throw whyNotListed(path, remote, error, on: connection)
        }
        return listing(try channel.readFolder(handle, path: remote, on: connection), of: path, at: remote, on: connection)
    }

    /// The safe entries of a folder's raw listing; abandoned staging files in it are removed.
    private func listing(
        _ raw: [(name: [UInt8], attributes: RemoteAttributes)], of path: SFTPPath, at remote: String,
        on connection: SFTPConnection
    ) -> [SFTPListing.Entry] {
        for name in SFTPListing.abandonedStagingFiles(in: raw) {
            // Best effort: the listing goes on whatever happens (a read-only share, a file
            // another client removed first).
            let target = (remote == "/" ? "" : remote) + "/" + name
            do throws(FileProviderError) {
                try connection.unlink(target)
                Self.logger.debug("removed \(TerminalText.quoted(target)) on \(connection.endpoint), left by an upload that was cut short")
            } catch {
                Self.logger.warning(
                    "cannot remove \(TerminalText.quoted(target)) on \(connection.endpoint), left by an upload that was cut short: \(error.message); remove it by hand"
                )
                if connection.isDead { break }
            }
        }
        return SFTPListing.decode(raw, in: path)
    }

    private func readFolderWithLibSSH2(_ remote: String, path: SFTPPath, on connection: SFTPConnection)
        throws(FileProviderError) -> [(name: [UInt8], attributes: RemoteAttributes)]
    {
        let directory: SFTPFile
        do {
            directory = try connection.openDirectory(remote)
        } catch where error.code != .serverUnreachable {
            throw whyNotListed(path, remote, error, on: connection)
        }
        var raw: [(name: [UInt8], attributes: RemoteAttributes)] = []
        while let entry = try directory.nextEntry() {
            raw.append(entry)
            if raw.count > ItemBounds.maximumEntriesPerFolder { throw ItemBounds.tooManyEntries(in: remote) }
        }
        try? directory.close()
        return raw
    }

    /// The error for a folder the server would not open: only now ask why (a listing normally
    /// needs no stat of the folder). A dead connection is left alone: the pool replaces it.
    private func whyNotListed(_ path: SFTPPath, _ remote: String, _ error: FileProviderError, on connection: SFTPConnection)
        -> FileProviderError
    {
        if error.code != .serverUnreachable, let attributes = try? connection.lstat(remote), attributes.kind != .folder {
            return FileProviderError(.invalidArgument, "\(path.display) is not a folder")
        }
        return error
    }
}
