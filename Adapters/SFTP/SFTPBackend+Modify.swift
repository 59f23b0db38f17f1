import AdapterKit
import Foundation
import ProviderCore

extension SFTPBackend {
    /// Changes a file's contents, modification date or executable bit (`.fileSystemFlags`: the
    /// permissions attribute, x where r is set or no x), renames or moves an item.
    ///
    /// New contents are uploaded to a staging file in the item's folder, with the file's
    /// executable bit (or the new one); the version is checked
    /// again just before the staging file is renamed over the item (with
    /// `posix-rename@openssh.com` where offered), so a stale write never overwrites. A rename or
    /// move never replaces an existing item and returns the item with its new path-derived
    /// identifier. Other fields are accepted and ignored.
    /// - Throws: `noSuchItem` when the item or the new parent is gone; `versionOutOfDate` when
    ///   the item's version is not `baseVersion` (nothing is changed); `filenameCollision` when
    ///   the new name is taken; `invalidFilename` for an unsafe new name; `invalidArgument` for
    ///   new contents on a folder or symlink, renaming the root, or moving a folder into itself;
    ///   `insufficientQuota` when the server is out of space; `permissionDenied` naming the path.
    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?,
        options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        let change = try ItemChange(item, changedFields: changedFields)
        let path = change.path
        let explicitDate = changedFields.contains(.contentModificationDate) ? item.contentModificationDate : nil
        let flag = CancellationFlag()
        let operation =
            contents != nil
            ? "PUT" : changedFields.contains(.filename) || changedFields.contains(.parentItemIdentifier) ? "RENAME" : "SETSTAT"
        // The engine's sink for the bytes read from `contents` (task-local: taken here).
        let sink = contents.flatMap { ContentSink.for($0) }
        return try await withConnection(
            flag, operation: operation, path: path, moved: { contents != nil ? $0.item.size : nil }
        ) { connection throws(FileProviderError) -> ItemResult in
            var located = try self.locate(path, on: connection)
            try Self.check(located.item, against: baseVersion)
            if changedFields.contains(.contents) {
                // New contents keep the store's executable bit unless the flags change too.
                let flags = changedFields.contains(.fileSystemFlags) ? item.fileSystemFlags : located.item.fileSystemFlags
                located = try self.replaceContents(
                    of: located, with: contents, date: explicitDate, flags: flags, base: baseVersion, cancellation: flag,
                    sink: sink, on: connection)
            } else {
                if let explicitDate {
                    let seconds = Int64(explicitDate.timeIntervalSince1970.rounded(.down))
                    try connection.setTimes(located.remote, modification: seconds, access: located.attributes.accessTime)
                    located = try self.locate(path, on: connection)
                }
                if changedFields.contains(.fileSystemFlags), located.item.kind == .file,
                    located.item.fileSystemFlags.contains(.userExecutable) != item.fileSystemFlags.contains(.userExecutable)
                {
                    let permissions = item.fileSystemFlags.applied(toMode: located.attributes.permissions & 0o7777)
                    try connection.setPermissions(located.remote, permissions)
                    located = try self.locate(path, on: connection)
                }
            }
            if change.renames {
                located = try self.move(
                    located, toName: change.name, in: change.parent(current: located.item.parentIdentifier), on: connection)
            }
            return ItemResult(item: located.item)
        }
    }

    private func replaceContents(
        of located: LocatedItem, with contents: URL?, date: Date?, flags: FileSystemFlags, base: ItemVersion,
        cancellation: CancellationFlag, sink: ContentSink? = nil, on connection: SFTPConnection
    ) throws(FileProviderError) -> LocatedItem {
        let path = located.path
        guard located.item.kind == .file else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; its contents cannot be set")
        }
        let folder = path.parent.remote(under: connection.rootPath)
        let staging = try stage(contents, in: folder, sink: sink, on: connection, cancellation: cancellation).path
        do throws(FileProviderError) {
            // The last check before the rename: nothing is overwritten if the item changed.
            let now = try locate(path, on: connection)
            try Self.check(now.item, against: base)
            try stamp(staging, current: now.attributes, explicit: date, on: connection)
            if flags.contains(.userExecutable) {
                let staged = try connection.lstat(staging)
                try connection.setPermissions(staging, flags.applied(toMode: staged.permissions & 0o7777))
            }
            try replace(located.remote, with: staging, on: connection)
        } catch {
            if !connection.isDead { try? connection.unlink(staging) }
            throw error
        }
        return try locate(path, on: connection)
    }

    private func move(_ located: LocatedItem, toName name: String, in parent: ItemIdentifier, on connection: SFTPConnection)
        throws(FileProviderError) -> LocatedItem
    {
        let path = located.path
        if name.hasSameBytes(as: path.name) && parent.hasSameBytes(as: located.item.parentIdentifier) {
            return located
        }
        let parentPath = try SFTPPath(parent)
        let target = try parentPath.child(named: name, reservedPrefix: SFTPPath.stagingPrefix)
        if located.item.kind == .folder && path.contains(parentPath) {
            throw FileProviderError(.invalidArgument, "\(path.display) cannot be moved into itself")
        }
        _ = try container(parentPath, on: connection)
        let remote = target.remote(under: connection.rootPath)
        // The last check before the rename.
        let now = try locate(path, on: connection)
        try Self.check(now.item, against: located.item.version)
        do throws(FileProviderError) {
            try connection.rename(located.remote, to: remote)
        } catch {
            if connection.isDead { throw error }
            if try connection.lstatIfPresent(remote) != nil {
                throw FileProviderError(
                    .filenameCollision, "an item named \(name.debugDescription) already exists in \(parentPath.display)")
            }
            throw error
        }
        return try locate(target, on: connection)
    }
}
