import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension LocalBackend {
    /// Changes a file's contents, modification date or executable bit (`.fileSystemFlags`:
    /// `chmod u+x,g+x,o+x` where r is set, or the x bits cleared), renames or moves an item.
    ///
    /// New contents go to a staging file in the item's folder, with the file's executable bit
    /// (or the new one); the version is checked again just before the staging file is renamed
    /// over the item. A rename or move never replaces an existing item and returns the item
    /// with its new path-derived identifier. Other fields are accepted and ignored.
    /// - Throws: `noSuchItem` when the item or the new parent is gone; `versionOutOfDate` when
    ///   the item's version is not `baseVersion` (nothing is changed); `filenameCollision` when
    ///   the new name is taken; `invalidFilename` for an unsafe new name; `invalidArgument` for
    ///   new contents on a folder or symlink, renaming the root, or moving a folder into itself.
    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?,
        options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        let change = try ItemChange(item, changedFields: changedFields)
        let path = change.path
        let flag = CancellationFlag()
        // The engine's sink for the bytes read from `contents` (task-local: taken here).
        let sink = contents.flatMap { ContentSink.for($0) }
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) -> ItemResult in
            try await self.io { () throws(FileProviderError) -> ItemResult in
                var located = try self.currentItem(at: path)
                try Self.check(located.item, against: baseVersion)
                if changedFields.contains(.contents) {
                    // New contents keep the store's executable bit unless the flags change too.
                    let flags = changedFields.contains(.fileSystemFlags) ? item.fileSystemFlags : located.item.fileSystemFlags
                    located = try self.replaceContents(
                        of: located, with: contents, date: item.contentModificationDate, flags: flags, base: baseVersion,
                        cancellation: flag, sink: sink)
                } else {
                    if changedFields.contains(.contentModificationDate), let date = item.contentModificationDate {
                        try located.parent.setModificationDate(date, of: path.name, displayPath: path.display)
                        located = try self.currentItem(at: path)
                    }
                    if changedFields.contains(.fileSystemFlags), located.item.kind == .file,
                        located.item.fileSystemFlags.contains(.userExecutable) != item.fileSystemFlags.contains(.userExecutable)
                    {
                        let mode = item.fileSystemFlags.applied(toMode: UInt32(located.info.st_mode & 0o7777))
                        try located.parent.setMode(mode_t(mode), of: path.name, displayPath: path.display)
                        located = try self.currentItem(at: path)
                    }
                }
                if change.renames {
                    located = try self.move(
                        located, toName: change.name, in: change.parent(current: located.item.parentIdentifier))
                }
                return ItemResult(item: located.item)
            }
        }
    }

    private func replaceContents(
        of located: LocatedItem, with contents: URL?, date: Date?, flags: FileSystemFlags, base: ItemVersion,
        cancellation: CancellationFlag, sink: ContentSink? = nil
    ) throws(FileProviderError) -> LocatedItem {
        let path = located.path
        guard located.item.kind == .file else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; its contents cannot be set")
        }
        let (staging, lock) = try stage(
            contents, in: located.parent, folderPath: path.parent, modificationDate: date, flags: flags,
            cancellation: cancellation, sink: sink)
        defer { withExtendedLifetime(lock) {} }
        do {
            // The last check before the rename: nothing is overwritten if the item changed.
            let now = try currentItem(at: path)
            try Self.check(now.item, against: base)
            try Rename.replacing(from: located.parent, staging, to: located.parent, path.name, displayPath: path.display)
        } catch {
            located.parent.removeQuietly(staging)
            throw error
        }
        return try currentItem(at: path)
    }

    private func move(_ located: LocatedItem, toName name: String, in parent: ItemIdentifier)
        throws(FileProviderError) -> LocatedItem
    {
        let path = located.path
        if name.hasSameBytes(as: path.name) && parent.hasSameBytes(as: located.item.parentIdentifier) {
            return located
        }
        let parentPath = try LocalPath(parent)
        let target = try parentPath.child(named: name, reservedPrefix: LocalPath.stagingPrefix)
        let (destination, _) = try openContainer(parent)
        // The last check before the rename.
        let now = try currentItem(at: path)
        try Self.check(now.item, against: located.item.version)
        do throws(FileProviderError) {
            try Rename.noReplace(from: located.parent, path.name, to: destination, name, displayPath: target.display)
        } catch where error.code == .filenameCollision {
            throw FileProviderError(
                .filenameCollision, "an item named \(name.debugDescription) already exists in \(parentPath.display)")
        }
        return try currentItem(at: target)
    }
}
