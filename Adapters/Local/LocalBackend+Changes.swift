import Foundation
import ProviderCore

extension LocalBackend {
    /// The most changed items (listed plus deleted) one ``enumerateChanges(in:from:)`` call
    /// returns before it says `moreComing`; a single folder's listing may go past it.
    static let changeBatchSize = 2_000
    /// The most changed folders one call lists.
    static let changeBatchFolders = 500

    /// Returns the anchor for "now" in the store's change feed (see ``ChangeFeed``): the same
    /// for a folder as for `.workingSet`. The first call starts watching the store.
    ///
    /// - Throws: `noSuchItem` when `container` is not a folder of the store (or is missing);
    ///   `cancelled` when the backend is closed.
    public func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor {
        if container != .workingSet {
            let path = try LocalPath(container)
            if !path.isRoot {
                _ = try await io { () throws(FileProviderError) -> Bool in
                    do throws(FileProviderError) {
                        _ = try self.openContainer(container)
                    } catch where error.code == .invalidArgument {
                        throw .noSuchItem(container)
                    }
                    return true
                }
            }
        }
        let feed = self.feed
        return try await io { () throws(FileProviderError) -> SyncAnchor in feed.anchor() }
    }

    /// Returns what changed since an anchor, in the whole store (`.workingSet` or the root) or
    /// at and below a folder: the current items of each folder that changed (with everything
    /// below a folder that appeared), and the items deleted or moved away from them that are not
    /// back. The same item may come again in a later call; a deletion may name an item the
    /// engine never knew.
    ///
    /// - Throws: `syncAnchorExpired` when the anchor was made by another process (or is not an
    ///   anchor of this backend), or the feed lost track since it: more than
    ///   ``ChangeFeed/maximumChanges`` changes, the kernel dropped events, or a folder could not
    ///   be watched (the inotify watch limit); the engine then lists the whole store.
    ///   `noSuchItem` when `container` names no item.
    public func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor)
        async throws(FileProviderError) -> ChangeSet
    {
        let scope: String?
        if container == .workingSet {
            scope = nil
        } else {
            scope = try LocalPath(container).components.joined(separator: "/")
        }
        let feed = self.feed
        var cursor = try await io { () throws(FileProviderError) -> UInt64 in
            try feed.validate(anchor)
        }
        var updated: [Item] = []
        var deleted: [ItemIdentifier] = []
        var refused: [RefusedItem] = []
        var foldersListed = 0
        while true {
            let (cursorNow, budget) = (cursor, Self.changeBatchFolders - foldersListed)
            let (entries, current) = try await io { () throws(FileProviderError) -> ([ChangeFeed.Entry], UInt64) in
                try feed.changes(after: cursorNow, under: scope, limit: max(1, budget))
            }
            if entries.isEmpty {
                if scope == nil { try await io { () throws(FileProviderError) -> Void in feed.reported(upTo: current) } }
                return ChangeSet(
                    updatedItems: updated, deletedIdentifiers: deleted, newAnchor: feed.encode(current), moreComing: false,
                    refused: refused)
            }
            for entry in entries {
                let folder = entry.path.isEmpty ? ItemIdentifier.rootContainer : ItemIdentifier(entry.path)
                var listing = ItemListing(items: [])
                var isFolder = true
                do {
                    listing = try await listAllItems(in: folder)
                } catch where error.code == .noSuchItem || error.code == .invalidArgument {
                    // Gone, or no longer a folder: its parent's change says so.
                    isFolder = false
                }
                foldersListed += 1
                if isFolder {
                    var present = Set<[UInt8]>()
                    for item in listing.items { present.insert(Array(item.filename.utf8)) }
                    for item in listing.refused { present.insert(Array(item.filename.utf8)) }
                    for name in entry.deleted where !present.contains(name) {
                        let child = String(decoding: name, as: UTF8.self)
                        deleted.append(ItemIdentifier(entry.path.isEmpty ? child : entry.path + "/" + child))
                    }
                    updated += listing.items
                    refused += listing.refused
                    if entry.recursive {
                        let subfolders = listing.items.filter { $0.kind == .folder }.map(\.identifier.rawValue)
                        try await io { () throws(FileProviderError) -> Void in feed.expanded(entry, subfolders: subfolders) }
                    }
                }
                cursor = entry.sequence
                if updated.count + deleted.count >= Self.changeBatchSize || foldersListed >= Self.changeBatchFolders {
                    let reached = cursor
                    if scope == nil { try await io { () throws(FileProviderError) -> Void in feed.reported(upTo: reached) } }
                    return ChangeSet(
                        updatedItems: updated, deletedIdentifiers: deleted, newAnchor: feed.encode(cursor), moreComing: true,
                        refused: refused)
                }
            }
        }
    }
}
