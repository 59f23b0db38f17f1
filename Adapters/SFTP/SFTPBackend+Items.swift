import Foundation
import ProviderCore

/// An item found on the server, with its path there.
struct LocatedItem {
    var item: Item
    var attributes: RemoteAttributes
    var path: SFTPPath
    /// The absolute path on the server.
    var remote: String
}

extension SFTPBackend {
    /// Checks that a folder below the root is reached without passing a symlink: its resolved
    /// path must be exactly the path asked for.
    ///
    /// - Throws: `noSuchItem` when it is missing or reached through a symlink.
    func verifyFolder(_ path: SFTPPath, on connection: SFTPConnection) throws(FileProviderError) {
        if path.isRoot { return }
        let remote = path.remote(under: connection.rootPath)
        let resolved = try connection.realpath(remote)
        guard resolved.utf8.elementsEqual(remote.utf8) else { throw symlinkRefused(path) }
    }

    /// The error for a folder reached through a symlink.
    func symlinkRefused(_ path: SFTPPath) -> FileProviderError {
        FileProviderError(.noSuchItem, "\(path.display) is reached through a symlink; it is not followed")
    }

    /// The item at a path as it is now.
    ///
    /// - Throws: `noSuchItem` when nothing (or nothing this store can represent) is there.
    func locate(_ path: SFTPPath, on connection: SFTPConnection) throws(FileProviderError) -> LocatedItem {
        let remote = path.remote(under: connection.rootPath)
        if path.isRoot {
            let attributes = try connection.stat(remote)
            return LocatedItem(item: rootItem(attributes, remote: remote), attributes: attributes, path: path, remote: remote)
        }
        if path.components.count > 1 { try verifyFolder(path.parent, on: connection) }
        let attributes = try connection.lstat(remote)
        guard let item = try makeItem(path: path, attributes: attributes, on: connection) else {
            throw .noSuchItem(path.identifier)
        }
        return LocatedItem(item: item, attributes: attributes, path: path, remote: remote)
    }

    /// The folder a container identifier names, checked to be a real folder inside the root.
    ///
    /// - Throws: `noSuchItem` when it does not exist or is reached through a symlink;
    ///   `invalidArgument` when it is not a folder.
    func container(_ path: SFTPPath, on connection: SFTPConnection) throws(FileProviderError) -> String {
        let remote = path.remote(under: connection.rootPath)
        if path.isRoot { return remote }
        if path.components.count > 1 { try verifyFolder(path.parent, on: connection) }
        let attributes = try connection.lstat(remote)
        guard attributes.kind == .folder else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a folder")
        }
        return remote
    }

    /// The error for an item the server described with an impossible value.
    static func refusal(_ path: SFTPPath, _ problem: String) -> FileProviderError {
        FileProviderError(
            .corruptData, "\(path.display): \(problem); the server sent an impossible value, so the item was left out")
    }

    func rootItem(_ attributes: RemoteAttributes, remote: String) -> Item {
        let name = remote.split(separator: "/").last.map(String.init) ?? "/"
        return Item(
            identifier: .rootContainer, parentIdentifier: .rootContainer, filename: name, kind: .folder,
            contentModificationDate: Date(timeIntervalSince1970: TimeInterval(attributes.modificationTime)),
            version: Self.version(of: attributes, kind: .folder))
    }

    /// Builds an item from its attributes; `nil` for kinds the store does not show (sockets,
    /// FIFOs, devices).
    ///
    /// - Throws: `corruptData` naming the item when the server sent an impossible value for it
    ///   (see ``RemoteAttributes/problem(for:)``); what reading a symlink's target throws.
    func makeItem(path: SFTPPath, attributes: RemoteAttributes, on connection: SFTPConnection)
        throws(FileProviderError) -> Item?
    {
        guard let kind = attributes.kind else { return nil }
        if let problem = attributes.problem(for: kind) { throw Self.refusal(path, problem) }
        var target: String?
        if kind == .symlink { target = try connection.readlink(path.remote(under: connection.rootPath)) }
        return Item(
            identifier: path.identifier, parentIdentifier: path.parent.identifier, filename: path.name, kind: kind,
            size: kind == .folder ? 0 : attributes.size,
            contentModificationDate: Date(timeIntervalSince1970: TimeInterval(attributes.modificationTime)),
            version: Self.version(of: attributes, kind: kind), symlinkTargetPath: target,
            fileSystemFlags: kind == .file ? FileSystemFlags(posixMode: attributes.permissions) : .plainFile)
    }

    /// The version of an item from its attributes.
    ///
    /// SFTP version 3 gives sizes and whole-second modification times, no inode. Content: size
    /// and modification time (a folder: a constant, so adding children does not make the
    /// folder's version stale). Metadata: permissions, owner and group. Writes through this
    /// backend keep modification times increasing (see ``SFTPBackend/modificationTime(for:current:explicit:)``),
    /// so two writes in the same second still give two versions.
    static func version(of attributes: RemoteAttributes, kind: ItemKind) -> ItemVersion {
        let content: VersionBytes
        switch kind {
        case .folder:
            content = VersionBytes(tag: 0x64)
        case .file, .symlink:
            content = VersionBytes(tag: kind == .file ? 0x66 : 0x6c)
                .appending(UInt64(bitPattern: attributes.size))
                .appending(UInt64(bitPattern: attributes.modificationTime))
        }
        let metadata = VersionBytes(tag: 0x6d)
            .appending(attributes.permissions)
            .appending(attributes.uid)
            .appending(attributes.gid)
        return ItemVersion(content: content.data, metadata: metadata.data)
    }

    /// Throws `versionOutOfDate` unless the item's version is `base`.
    static func check(_ item: Item, against base: ItemVersion?) throws(FileProviderError) {
        if let base, base != item.version { throw .versionOutOfDate(item.identifier) }
    }

    /// The modification time to give new contents that replace a file.
    ///
    /// An explicit date is kept unless it would give the same version as the current file
    /// (same size and second). Without one, the server's time is kept unless it is not later
    /// than the current file's, in which case it becomes one second later: writes through this
    /// backend never reuse a version, even several within one second.
    static func modificationTime(for new: RemoteAttributes, current: RemoteAttributes, explicit: Int64?) -> Int64 {
        if let explicit {
            if explicit == current.modificationTime && new.size == current.size { return explicit + 1 }
            return explicit
        }
        if new.modificationTime <= current.modificationTime { return current.modificationTime + 1 }
        return new.modificationTime
    }
}

extension String {
    /// Equality of the exact bytes: NFC and NFD spellings of a name are different names.
    func hasSameBytes(as other: String) -> Bool { utf8.elementsEqual(other.utf8) }
}

extension ItemIdentifier {
    func hasSameBytes(as other: ItemIdentifier) -> Bool { rawValue.hasSameBytes(as: other.rawValue) }
}
