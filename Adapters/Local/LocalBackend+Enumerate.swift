import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension LocalBackend {
    private static let pagePrefix = Array("local-after:".utf8)

    /// Returns one page of the items directly inside a folder, sorted by the bytes of their
    /// names.
    ///
    /// A page token is the last name of the previous page, so paging stays stable while the
    /// folder changes. Names that are not UTF-8 or not safe, the backend's staging files, and
    /// sockets, FIFOs and devices are skipped.
    /// - Throws: `noSuchItem` when the folder does not exist; `invalidArgument` when the
    ///   identifier is not a folder; `pageExpired` for a page token this backend did not make.
    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page)
        async throws(FileProviderError) -> ItemPage
    {
        let after: [UInt8]?
        if page.isInitial {
            after = nil
        } else {
            let raw = [UInt8](page.rawValue)
            guard raw.starts(with: Self.pagePrefix) else {
                throw FileProviderError(.pageExpired, "the page token was not made by the local backend")
            }
            after = Array(raw.dropFirst(Self.pagePrefix.count))
        }
        return try await io { () throws(FileProviderError) -> ItemPage in
            try self.listPage(of: container, after: after)
        }
    }

    private func listPage(of container: ItemIdentifier, after: [UInt8]?) throws(FileProviderError) -> ItemPage {
        let (folder, path) = try openContainer(container)
        let names = try sortedNames(of: folder, path: path)
        var index = after.map { Self.firstIndex(in: names, after: $0) } ?? 0
        var items: [Item] = []
        items.reserveCapacity(min(pageSize, names.count - index))
        var lastName: [UInt8]?
        var refused: [RefusedItem] = []
        // Made once for the folder, not once per child.
        let folderIdentifier = path.identifier
        let prefix = path.isRoot ? "" : folderIdentifier.rawValue + "/"
        while index < names.count && items.count < pageSize {
            let raw = names[index]
            index += 1
            lastName = raw
            guard let name = Filename.decode(raw), path.allowsChild(named: name) else {
                if raw.starts(with: LocalPath.stagingPrefix.utf8), let name = Filename.decode(raw) {
                    reapStagingFile(name, in: folder, displayPath: path.appending(name).display)
                }
                continue
            }
            // The child's path for messages, made only when one is needed.
            func display() -> String { path.appending(name).display }
            do throws(FileProviderError) {
                guard let info = try folder.statEntry(name, displayPath: display()) else { continue }
                if let problem = Self.problem(with: info) {
                    refused.append(RefusedItem(identifier: ItemIdentifier(prefix + name), filename: name, reason: problem))
                    continue
                }
                guard
                    let item = try makeItem(
                        name: name, identifier: ItemIdentifier(prefix + name), parentIdentifier: folderIdentifier, info: info,
                        in: folder, displayPath: display())
                else { continue }
                items.append(item)
            } catch where error.code == .noSuchItem {
                continue  // removed while listing
            }
        }
        let nextPage = index < names.count ? lastName.map { Page(Data(Self.pagePrefix + $0)) } : nil
        return ItemPage(items: items, nextPage: nextPage, refused: refused)
    }

    /// The names in a folder sorted by bytes, from the cache while the folder is unchanged.
    private func sortedNames(of folder: FileHandleFD, path: LocalPath) throws(FileProviderError) -> [[UInt8]] {
        let key = ListingCache.Key(try folder.stat())
        if let names = listings.names(for: key) { return names }
        var names = try folder.entryNames(displayPath: path.display)
        names.sort { $0.lexicographicallyPrecedes($1) }
        if names.count > pageSize {
            // Only listings that take several pages are worth keeping; check the folder did not
            // change while it was read.
            if ListingCache.Key(try folder.stat()) == key { listings.store(names, for: key) }
        }
        return names
    }

    /// The index of the first name sorted after `name`.
    private static func firstIndex(in names: [[UInt8]], after name: [UInt8]) -> Int {
        var low = 0
        var high = names.count
        while low < high {
            let middle = (low + high) / 2
            if name.lexicographicallyPrecedes(names[middle]) {
                high = middle
            } else {
                low = middle + 1
            }
        }
        return low
    }
}
