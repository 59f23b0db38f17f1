import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// An item found on disk, with the open folder that holds it.
struct LocatedItem {
    var item: Item
    var info: stat
    var path: LocalPath
    /// The folder holding the item (the root itself for the root).
    var parent: FileHandleFD
}

extension LocalBackend {
    /// Opens a folder of the store, one component at a time, never through a symlink.
    ///
    /// - Throws: `noSuchItem` when a component is missing, not a folder, or a symlink.
    func openFolder(_ path: LocalPath) throws(FileProviderError) -> FileHandleFD {
        var current = root
        var walked = LocalPath.root
        for name in path.components {
            walked = walked.appending(name)
            current = try current.openFolder(name, displayPath: walked.display)
        }
        return current
    }

    /// Opens a folder of the store by identifier.
    ///
    /// - Throws: `noSuchItem` when it does not exist; `invalidArgument` when it is not a folder.
    func openContainer(_ identifier: ItemIdentifier) throws(FileProviderError) -> (FileHandleFD, LocalPath) {
        let path = try LocalPath(identifier)
        if path.isRoot { return (root, path) }
        let parent = try openFolder(path.parent)
        guard let info = try parent.statEntry(path.name, displayPath: path.display) else {
            throw .noSuchItem(identifier)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a folder")
        }
        return (try parent.openFolder(path.name, displayPath: path.display), path)
    }

    /// The item at a path as it is now.
    ///
    /// - Throws: `noSuchItem` when nothing (or nothing this store can represent) is there.
    func currentItem(at path: LocalPath) throws(FileProviderError) -> LocatedItem {
        if path.isRoot {
            let info = try root.stat()
            return LocatedItem(item: rootItem(info), info: info, path: path, parent: root)
        }
        let parent = try openFolder(path.parent)
        guard let info = try parent.statEntry(path.name, displayPath: path.display),
            let item = try makeItem(path: path, info: info, in: parent)
        else { throw .noSuchItem(path.identifier) }
        return LocatedItem(item: item, info: info, path: path, parent: parent)
    }

    func rootItem(_ info: stat) -> Item {
        Item(
            identifier: .rootContainer, parentIdentifier: .rootContainer,
            filename: URL(fileURLWithPath: rootPath).lastPathComponent, kind: .folder,
            contentModificationDate: ItemBounds.problem(withSeconds: info.st_mtim.tv_sec, "") == nil ? info.st_mtim.date : nil,
            version: Self.version(of: info, kind: .folder))
    }

    /// Builds an item from its status; `nil` for kinds the store does not show (sockets, FIFOs,
    /// devices).
    ///
    /// - Throws: `corruptData` naming the item when its size or modification time is outside
    ///   ``ItemBounds`` (a file dated after 2200, say); what reading a symlink's target throws.
    func makeItem(path: LocalPath, info: stat, in parent: FileHandleFD) throws(FileProviderError) -> Item? {
        try makeItem(
            name: path.name, identifier: path.identifier, parentIdentifier: path.parent.identifier, info: info, in: parent,
            displayPath: path.display)
    }

    /// ``makeItem(path:info:in:)`` with the identifiers already made (a listing makes its
    /// folder's once).
    func makeItem(
        name: String, identifier: ItemIdentifier, parentIdentifier: ItemIdentifier, info: stat, in parent: FileHandleFD,
        displayPath: @autoclosure () -> String
    ) throws(FileProviderError) -> Item? {
        let kind: ItemKind
        var target: String?
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .folder
        case S_IFLNK:
            kind = .symlink
            target = try parent.readLink(name, displayPath: displayPath())
        default: return nil
        }
        if let problem = Self.problem(with: info) {
            throw FileProviderError(
                .corruptData, "\(displayPath()): \(problem); this value cannot be synced, so the item was left out")
        }
        return Item(
            identifier: identifier, parentIdentifier: parentIdentifier, filename: name,
            kind: kind, size: kind == .folder ? 0 : Int64(info.st_size),
            contentModificationDate: info.st_mtim.date, version: Self.version(of: info, kind: kind),
            symlinkTargetPath: target,
            fileSystemFlags: kind == .file ? FileSystemFlags(posixMode: UInt32(info.st_mode)) : .plainFile)
    }

    /// Why an entry's status cannot describe an item, or `nil`: the file system's numbers are
    /// checked like any store's (``ItemBounds``): a size (not a folder's) or a modification
    /// time outside them, such as a file dated after 2200.
    static func problem(with info: stat) -> String? {
        (info.st_mode & S_IFMT == S_IFDIR ? nil : ItemBounds.problem(withSize: info.st_size))
            ?? ItemBounds.problem(withSeconds: info.st_mtim.tv_sec, "modification date")
    }

    /// The version of an item from its status.
    ///
    /// Content: size, modification time in nanoseconds and inode (a folder: its inode only, so
    /// adding children does not make the folder's version stale). Metadata: change time in
    /// nanoseconds and mode (a folder: mode only), which chmod and rename change.
    static func version(of info: stat, kind: ItemKind) -> ItemVersion {
        if kind == .folder {
            return ItemVersion(
                content: VersionBytes(tag: 0x64).appending(UInt64(info.st_ino)).data,
                metadata: VersionBytes(tag: 0x64).appending(UInt32(info.st_mode)).data)
        }
        let content = VersionBytes(tag: kind == .file ? 0x66 : 0x6c)
            .appending(UInt64(bitPattern: Int64(info.st_size)))
            .appending(UInt64(bitPattern: info.st_mtim.nanoseconds))
            .appending(UInt64(info.st_ino))
        let metadata = VersionBytes(tag: 0x6d)
            .appending(UInt64(bitPattern: info.st_ctim.nanoseconds))
            .appending(UInt32(info.st_mode))
        return ItemVersion(content: content.data, metadata: metadata.data)
    }

    /// Throws `versionOutOfDate` unless the item's version is `base`.
    static func check(_ item: Item, against base: ItemVersion?) throws(FileProviderError) {
        if let base, base != item.version { throw .versionOutOfDate(item.identifier) }
    }
}
