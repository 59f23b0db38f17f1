import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension LocalBackend {
    /// The size of the chunks files are copied in.
    static let chunkSize = 1 << 20

    /// Streams a file into `destination` (`copy_file_range`, or 1 MiB reads and writes where
    /// the file systems cannot), resuming after `offset` bytes.
    ///
    /// Reports progress after every chunk. The file is opened without following symlinks.
    /// - Throws: `noSuchItem` when the item is gone; `invalidArgument` for a folder or a symlink;
    ///   `versionNoLongerAvailable` when `version` is given and the file's content version is
    ///   another one, or when the file changed while it was read; `fileWriteOutOfSpace` when
    ///   the disk holding `destination` is full, `localIOFailure` when it cannot be written for
    ///   another reason; `cancelled` when the task is cancelled.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let path = try LocalPath(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let flag = CancellationFlag()
        // The engine's sink for the bytes written (task-local: taken here).
        let sink = ContentSink.for(destination)
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) -> Item in
            try await self.io { () throws(FileProviderError) -> Item in
                var copier = Copier()
                return try self.copyOut(
                    path: path, in: try self.openFolder(path.parent), version: version, to: destination.path, offset: offset,
                    progress: progress, cancellation: flag, copier: &copier, sink: sink)
            }
        }
    }

    /// Copies the files of a batch in one job on the backend's threads, each as
    /// ``fetchContents(for:version:to:offset:progress:)`` does: no hand-off between threads per
    /// file, the folder of consecutive files opened once, one buffer for the batch where a
    /// copy needs one.
    ///
    /// Each outcome is what ``fetchContents(for:version:to:offset:progress:)`` throws or
    /// returns for that file; once the task is cancelled, the files not copied yet get
    /// `cancelled`.
    public func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        if requests.isEmpty { return [] }
        let flag = CancellationFlag()
        let sinks = requests.map { ContentSink.for($0.destination) }
        do {
            return try await withCancellationFlag(flag) { () async throws(FileProviderError) -> [Result<Item, FileProviderError>] in
                try await self.io { () -> [Result<Item, FileProviderError>] in
                    var copier = Copier()
                    var folder: (path: LocalPath, handle: FileHandleFD)?
                    return requests.enumerated().map { index, request in
                        do throws(FileProviderError) {
                            try flag.check()
                            let path = try LocalPath(request.identifier)
                            if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
                            let parent: FileHandleFD
                            if let folder, folder.path == path.parent {
                                parent = folder.handle
                            } else {
                                parent = try self.openFolder(path.parent)
                                folder = (path.parent, parent)
                            }
                            var fileProgress: ProgressHandler?
                            if let progress { fileProgress = { completed, total in progress(index, completed, total) } }
                            return .success(
                                try self.copyOut(
                                    path: path, in: parent, version: request.version, to: request.destination.path,
                                    offset: request.offset, progress: fileProgress, cancellation: flag, copier: &copier,
                                    sink: sinks[index]))
                        } catch {
                            return .failure(error)
                        }
                    }
                }
            }
        } catch {
            return requests.map { _ in .failure(error) }
        }
    }

    /// Copies one file of the folder `parent` into `destination`. The status is read once
    /// before the file is opened (so no FIFO or device is ever opened), once on the open file,
    /// and once after the copy to check that the file did not change meanwhile. The bytes
    /// written also go to `sink` (the engine's ``ContentSink``).
    private func copyOut(
        path: LocalPath, in parent: FileHandleFD, version: ItemVersion?, to destination: String, offset: Int64,
        progress: ProgressHandler?, cancellation: CancellationFlag, copier: inout Copier, sink: ContentSink?
    ) throws(FileProviderError) -> Item {
        guard let entry = try parent.statEntry(path.name, displayPath: path.display) else {
            throw .noSuchItem(path.identifier)
        }
        guard entry.st_mode & S_IFMT == S_IFREG else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; it has no contents to fetch")
        }
        let source = try parent.openFileForReading(path.name, displayPath: path.display)
        let before = try source.stat()
        guard before.st_mode & S_IFMT == S_IFREG,
            let item = try makeItem(path: path, info: before, in: parent)
        else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; it has no contents to fetch")
        }
        if let version, version.content != item.version.content {
            throw FileProviderError(
                .versionNoLongerAvailable, "\(path.display) changed; the requested version is gone")
        }
        let start = offset > 0 && offset <= item.size ? offset : 0
        // A fresh download truncates as it opens; a resumed one keeps its first `start` bytes.
        let output = try Self.writingDestination { () throws(FileProviderError) in
            try FileHandleFD.open(path: destination, flags: O_WRONLY | O_CREAT | (start == 0 ? O_TRUNC : 0))
        }
        if start > 0 {
            try Self.writingDestination { () throws(FileProviderError) in try output.truncate(to: start, displayPath: destination) }
        }
        progress?(start, item.size)
        // Up to the size the file had when opened; a file that grew, shrank or changed
        // meanwhile fails the check after.
        let completed = try copier.copy(
            from: source, to: output, range: start..<item.size, sourcePath: path.display, destinationPath: destination,
            cancellation: cancellation, sink: sink
        ) { progress?($0, item.size) }
        let after = try source.stat()
        if Self.version(of: after, kind: .file).content != item.version.content || completed != item.size {
            throw FileProviderError(
                .versionNoLongerAvailable, "\(path.display) changed while it was read; fetch it again")
        }
        return item
    }

    /// Writes bytes `range` of a file (clamped to its size) into `destination` at the same
    /// offsets, in 1 MiB `pread`/`pwrite` steps on the backend's threads; never truncates
    /// `destination` or writes outside the range.
    ///
    /// The file's content version (size, modification time in ns, inode) is checked on the
    /// opened file before the first byte is read and again after the last: a file that changed
    /// meanwhile is not reported as `version`.
    /// - Throws: `invalidArgument` for a folder or a symlink, or an empty range or one starting
    ///   below 0; `noSuchItem` when the item is gone; `versionNoLongerAvailable` when the file's
    ///   content version is not `version.content`, or the file changed or ended early while it
    ///   was read; `fileWriteOutOfSpace` when the disk holding `destination` is full,
    ///   `localIOFailure` when it cannot be opened or written for another reason; `cancelled`.
    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try PartialContents.validate(range)
        let path = try LocalPath(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let flag = CancellationFlag()
        // Taken here: task-local values do not reach the I/O threads.
        let sink = ContentSink.for(destination)
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) -> PartialContents in
            try await self.io { () throws(FileProviderError) -> PartialContents in
                try self.copyOut(path: path, version: version, range: range, to: destination.path, sink: sink, cancellation: flag)
            }
        }
    }

    private func copyOut(
        path: LocalPath, version: ItemVersion, range: Range<Int64>, to destination: String, sink: ContentSink?,
        cancellation: CancellationFlag
    ) throws(FileProviderError) -> PartialContents {
        let parent = try openFolder(path.parent)
        let source = try parent.openFileForReading(path.name, displayPath: path.display)
        let before = try source.stat()
        guard before.st_mode & S_IFMT == S_IFREG, let item = try makeItem(path: path, info: before, in: parent) else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; it has no contents to fetch")
        }
        if version.content != item.version.content {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed; the requested version is gone")
        }
        let written = PartialContents.clamp(range, toSize: item.size)
        if written.isEmpty { return PartialContents(item: item, range: written) }
        let output = try Self.writingDestination { () throws(FileProviderError) in
            try FileHandleFD.open(path: destination, flags: O_WRONLY)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Int(min(Int64(Self.chunkSize), Int64(written.count))), alignment: 16)
        defer { buffer.deallocate() }
        var offset = written.lowerBound
        while offset < written.upperBound {
            try cancellation.check()
            let wanted = Int(min(Int64(buffer.count), written.upperBound - offset))
            let count = try source.read(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]), at: offset, displayPath: path.display)
            if count == 0 {
                throw FileProviderError(
                    .versionNoLongerAvailable, "\(path.display) ended at \(offset) bytes while it was read; fetch it again")
            }
            try Self.writingDestination { () throws(FileProviderError) in
                try output.writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), at: offset, displayPath: destination)
            }
            sink?.consume(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), at: offset)
            offset += Int64(count)
        }
        let after = try source.stat()
        if Self.version(of: after, kind: .file).content != item.version.content {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed while it was read; fetch it again")
        }
        return PartialContents(item: item, range: written)
    }

    /// Runs a step that writes the engine's destination file: a full disk there is the local
    /// disk, so `insufficientQuota` (the store is full) becomes `fileWriteOutOfSpace`.
    static func writingDestination<T>(_ body: () throws(FileProviderError) -> T) throws(FileProviderError) -> T {
        do {
            return try body()
        } catch where error.code == .insufficientQuota {
            throw FileProviderError(.fileWriteOutOfSpace, error.message)
        }
    }
}
