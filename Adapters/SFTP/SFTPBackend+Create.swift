import AdapterKit
import Foundation
import ProviderCore

extension SFTPBackend {
    /// Creates a file, folder or symlink from a template.
    ///
    /// A file's contents are uploaded to a staging file in the target folder and renamed into
    /// place with SFTP's rename, which never replaces an existing item, so nobody sees a
    /// half-written file under the real name. With `mayAlreadyExist`, an existing item of the
    /// same kind is returned; an existing file whose bytes differ from `contents` is atomically
    /// replaced, so a replay ends with the template's contents and never makes a duplicate.
    /// - Throws: `invalidFilename` for an unsafe name; `noSuchItem` when the parent does not
    ///   exist; `invalidArgument` when the parent is not a folder or a symlink template has no
    ///   target; `filenameCollision` when the name is taken (without `mayAlreadyExist`, or by an
    ///   item of another kind); `insufficientQuota` when the server is out of space;
    ///   `permissionDenied` naming the path; `localIOFailure` when `contents` cannot be read.
    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let new = try NewItem(template, options: options, reservedPrefix: SFTPPath.stagingPrefix)
        let parentPath = new.parent
        if template.kind == .symlink {
            guard let target = template.symlinkTargetPath, !target.isEmpty, !target.utf8.contains(0) else {
                throw FileProviderError(.invalidArgument, "a symlink needs a target path")
            }
        }
        let flag = CancellationFlag()
        // The engine's sink for the bytes read from `contents` (task-local: taken here).
        let sink = contents.flatMap { ContentSink.for($0) }
        return try await withConnection(
            flag, operation: template.kind == .file ? "PUT" : template.kind == .folder ? "MKDIR" : "SYMLINK",
            path: new.path, moved: { $0.item.kind == .file ? $0.item.size : nil }
        ) { connection throws(FileProviderError) -> ItemResult in
            let folder = try self.container(parentPath, on: connection)
            let path = new.path
            let remote = path.remote(under: connection.rootPath)
            let replay = new.replay
            switch template.kind {
            case .folder:
                try self.createFolder(path, remote: remote, replay: replay, on: connection)
            case .symlink:
                try self.createSymlink(
                    path, remote: remote, folder: folder, target: template.symlinkTargetPath ?? "", replay: replay,
                    on: connection)
            case .file:
                let created = try self.createFile(
                    path, remote: remote, folder: folder, contents: contents, date: template.contentModificationDate,
                    replay: replay, cancellation: flag, sink: sink, on: connection)
                if template.fileSystemFlags.contains(.userExecutable) {
                    // Uploaded 0644: x where r is, then looked up again.
                    let attributes = try connection.lstat(remote)
                    try connection.setPermissions(remote, template.fileSystemFlags.applied(toMode: attributes.permissions & 0o7777))
                    return ItemResult(item: try self.locate(path, on: connection).item)
                }
                if let created { return ItemResult(item: created) }
            }
            return ItemResult(item: try self.locate(path, on: connection).item)
        }
    }

    private func collision(_ path: SFTPPath) -> FileProviderError {
        FileProviderError(
            .filenameCollision, "an item named \(path.name.debugDescription) already exists in \(path.parent.display)")
    }

    /// After a failed creation: throws `filenameCollision` unless this is a replay and an item
    /// of `kind` is at `path`; rethrows `error` when nothing is there.
    private func checkReplay(
        _ path: SFTPPath, remote: String, kind: ItemKind, replay: Bool, error: FileProviderError,
        on connection: SFTPConnection
    ) throws(FileProviderError) -> RemoteAttributes {
        guard let existing = try connection.lstatIfPresent(remote) else { throw error }
        guard replay, existing.kind == kind else { throw collision(path) }
        return existing
    }

    private func createFolder(_ path: SFTPPath, remote: String, replay: Bool, on connection: SFTPConnection)
        throws(FileProviderError)
    {
        do throws(FileProviderError) {
            try connection.mkdir(remote)
        } catch {
            if connection.isDead { throw error }
            _ = try checkReplay(path, remote: remote, kind: .folder, replay: replay, error: error, on: connection)
        }
    }

    private func createSymlink(
        _ path: SFTPPath, remote: String, folder: String, target: String, replay: Bool, on connection: SFTPConnection
    ) throws(FileProviderError) {
        do throws(FileProviderError) {
            try connection.symlink(remote, target: target)
        } catch {
            if connection.isDead { throw error }
            _ = try checkReplay(path, remote: remote, kind: .symlink, replay: replay, error: error, on: connection)
            if try connection.readlink(remote).hasSameBytes(as: target) { return }
            let staging = (folder == "/" ? "" : folder) + "/" + SFTPPath.stagingName()
            try connection.symlink(staging, target: target)
            do throws(FileProviderError) {
                try replace(remote, with: staging, on: connection)
            } catch {
                try? connection.unlink(staging)
                throw error
            }
        }
    }

    /// Uploads a new file and renames it into place; returns the new item when its attributes
    /// are known without looking it up again (`nil` after a replay took an existing file).
    private func createFile(
        _ path: SFTPPath, remote: String, folder: String, contents: URL?, date: Date?, replay: Bool,
        cancellation: CancellationFlag, sink: ContentSink? = nil, on connection: SFTPConnection
    ) throws(FileProviderError) -> Item? {
        if replay, let existing = try connection.lstatIfPresent(remote) {
            guard existing.kind == .file else { throw collision(path) }
            if try remoteFile(remote, size: existing.size, matches: contents, on: connection) { return nil }
            let staging = try stage(contents, in: folder, sink: sink, on: connection, cancellation: cancellation).path
            do throws(FileProviderError) {
                try stamp(staging, current: existing, explicit: date, on: connection)
                try replace(remote, with: staging, on: connection)
            } catch {
                if !connection.isDead { try? connection.unlink(staging) }
                throw error
            }
            return nil
        }
        // The dates are set and the attributes read on the open handle: the renamed file has them.
        let seconds = date.map { Int64($0.timeIntervalSince1970.rounded(.down)) }
        let staged = try stage(
            contents, in: folder, modificationTime: seconds, describe: true, sink: sink, on: connection, cancellation: cancellation)
        do throws(FileProviderError) {
            try connection.rename(staged.path, to: remote)
        } catch {
            if connection.isDead { throw error }
            try? connection.unlink(staged.path)
            guard try connection.lstatIfPresent(remote) != nil else { throw error }
            // Created by someone else meanwhile: a replay may still take it.
            if replay {
                return try createFile(
                    path, remote: remote, folder: folder, contents: contents, date: date, replay: replay,
                    cancellation: cancellation, sink: sink, on: connection)
            }
            throw collision(path)
        }
        guard let attributes = staged.attributes else { return nil }
        return try makeItem(path: path, attributes: attributes, on: connection)
    }
}
