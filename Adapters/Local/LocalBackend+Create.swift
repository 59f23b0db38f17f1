import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension LocalBackend {
    /// Creates a file, folder or symlink from a template.
    ///
    /// A file's contents are written to a staging file in the target folder and renamed into
    /// place without replacing anything, so a reader never sees a half-written file. With
    /// `mayAlreadyExist`, an existing item of the same kind is returned; an existing file whose
    /// contents differ from `contents` is atomically replaced, so a replay ends with the
    /// template's contents and never makes a duplicate.
    /// - Throws: `invalidFilename` for an unsafe name; `noSuchItem` when the parent does not
    ///   exist; `invalidArgument` when the parent is not a folder or a symlink template has no
    ///   target; `filenameCollision` when the name is taken (without `mayAlreadyExist`, or by an
    ///   item of another kind); `insufficientQuota` when the disk is full; `localIOFailure`
    ///   when `contents` cannot be read.
    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let new = try NewItem(template, options: options, reservedPrefix: LocalPath.stagingPrefix)
        let flag = CancellationFlag()
        // The engine's sink for the bytes read from `contents` (task-local: taken here).
        let sink = contents.flatMap { ContentSink.for($0) }
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) -> ItemResult in
            try await self.io { () throws(FileProviderError) -> ItemResult in
                let (folder, _) = try self.openContainer(template.parentIdentifier)
                let (path, replay) = (new.path, new.replay)
                switch template.kind {
                case .folder:
                    try self.createFolder(at: path, in: folder, replay: replay)
                case .symlink:
                    try self.createSymlink(at: path, in: folder, target: template.symlinkTargetPath, replay: replay)
                case .file:
                    try self.createFile(
                        at: path, in: folder, contents: contents, date: template.contentModificationDate,
                        flags: template.fileSystemFlags, replay: replay, cancellation: flag, sink: sink)
                }
                return ItemResult(item: try self.currentItem(at: path).item)
            }
        }
    }

    private func collision(_ path: LocalPath) -> FileProviderError {
        FileProviderError(.filenameCollision, "an item named \(path.name.debugDescription) already exists in \(path.parent.display)")
    }

    /// Throws `filenameCollision` unless this is a replay and an item of `kind` is at `path`.
    private func checkReplay(at path: LocalPath, in folder: FileHandleFD, kind: ItemKind, replay: Bool)
        throws(FileProviderError)
    {
        guard replay, let info = try folder.statEntry(path.name, displayPath: path.display),
            try makeItem(path: path, info: info, in: folder)?.kind == kind
        else { throw collision(path) }
    }

    private func createFolder(at path: LocalPath, in folder: FileHandleFD, replay: Bool) throws(FileProviderError) {
        do throws(FileProviderError) {
            try folder.makeFolder(path.name, displayPath: path.display)
        } catch where error.code == .filenameCollision {
            try checkReplay(at: path, in: folder, kind: .folder, replay: replay)
        }
    }

    private func createSymlink(at path: LocalPath, in folder: FileHandleFD, target: String?, replay: Bool)
        throws(FileProviderError)
    {
        guard let target, !target.isEmpty, !target.utf8.contains(0) else {
            throw FileProviderError(.invalidArgument, "a symlink needs a target path")
        }
        do throws(FileProviderError) {
            try folder.makeSymlink(path.name, target: target, displayPath: path.display)
        } catch where error.code == .filenameCollision {
            try checkReplay(at: path, in: folder, kind: .symlink, replay: replay)
            if try folder.readLink(path.name, displayPath: path.display).hasSameBytes(as: target) { return }
            let staging = LocalPath.stagingName()
            try folder.makeSymlink(staging, target: target, displayPath: path.display)
            do {
                try Rename.replacing(from: folder, staging, to: folder, path.name, displayPath: path.display)
            } catch {
                folder.removeQuietly(staging)
                throw error
            }
        }
    }

    private func createFile(
        at path: LocalPath, in folder: FileHandleFD, contents: URL?, date: Date?, flags: FileSystemFlags, replay: Bool,
        cancellation: CancellationFlag, sink: ContentSink? = nil
    ) throws(FileProviderError) {
        if replay, try folder.statEntry(path.name, displayPath: path.display) != nil {
            try checkReplay(at: path, in: folder, kind: .file, replay: replay)
            if try file(path.name, in: folder, displayPath: path.display, hasContentsOf: contents) { return }
            let (staging, lock) = try stage(
                contents, in: folder, folderPath: path.parent, modificationDate: date, flags: flags, cancellation: cancellation,
                sink: sink)
            defer { withExtendedLifetime(lock) {} }
            do {
                try Rename.replacing(from: folder, staging, to: folder, path.name, displayPath: path.display)
            } catch {
                folder.removeQuietly(staging)
                throw error
            }
            return
        }
        let (staging, lock) = try stage(
            contents, in: folder, folderPath: path.parent, modificationDate: date, flags: flags, cancellation: cancellation,
            sink: sink)
        defer { withExtendedLifetime(lock) {} }
        do {
            try Rename.noReplace(from: folder, staging, to: folder, path.name, displayPath: path.display)
        } catch {
            folder.removeQuietly(staging)
            if error.code == .filenameCollision {
                // Created by someone else meanwhile: a replay may still take it.
                if replay {
                    try createFile(
                        at: path, in: folder, contents: contents, date: date, flags: flags, replay: replay,
                        cancellation: cancellation)
                    return
                }
                throw collision(path)
            }
            throw error
        }
    }
}
