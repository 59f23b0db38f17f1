import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Set when the task waiting on blocking work is cancelled; the work checks it between chunks.
final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var cancelled = false

    func cancel() { lock.withLock { cancelled = true } }
    var isCancelled: Bool { lock.withLock { cancelled } }

    /// Throws `cancelled` once the flag is set.
    func check() throws(FileProviderError) {
        if isCancelled { throw FileProviderError(.cancelled, "cancelled") }
    }
}

extension LocalBackend {
    /// The size of the chunks files are copied in.
    static let chunkSize = 1 << 20

    /// Streams a file into `destination` in 1 MiB chunks, resuming after `offset` bytes.
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
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) -> Item in
            try await self.io { () throws(FileProviderError) -> Item in
                try self.copyOut(
                    path: path, version: version, to: destination.path, offset: offset, progress: progress,
                    cancellation: flag)
            }
        }
    }

    private func copyOut(
        path: LocalPath, version: ItemVersion?, to destination: String, offset: Int64,
        progress: ProgressHandler?, cancellation: CancellationFlag
    ) throws(FileProviderError) -> Item {
        let parent = try openFolder(path.parent)
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
        let output = try Self.writingDestination { () throws(FileProviderError) in
            try FileHandleFD.open(path: destination, flags: O_WRONLY | O_CREAT)
        }
        let start = offset > 0 && offset <= item.size ? offset : 0
        try Self.writingDestination { () throws(FileProviderError) in
            try output.truncate(to: start, displayPath: destination)
            try output.seek(to: start, displayPath: destination)
        }
        try source.seek(to: start, displayPath: path.display)
        progress?(start, item.size)

        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var completed = start
        while true {
            try cancellation.check()
            let count = try source.read(into: buffer, displayPath: path.display)
            if count == 0 { break }
            try Self.writingDestination { () throws(FileProviderError) in
                try output.writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), displayPath: destination)
            }
            completed += Int64(count)
            progress?(completed, item.size)
        }
        let after = try source.stat()
        if Self.version(of: after, kind: .file).content != item.version.content || completed != item.size {
            throw FileProviderError(
                .versionNoLongerAvailable, "\(path.display) changed while it was read; fetch it again")
        }
        return item
    }

    /// Runs a step that writes the engine's destination file: a full disk there is the local
    /// disk, so `insufficientQuota` (the store is full) becomes `fileWriteOutOfSpace`.
    private static func writingDestination<T>(_ body: () throws(FileProviderError) -> T) throws(FileProviderError) -> T {
        do {
            return try body()
        } catch where error.code == .insufficientQuota {
            throw FileProviderError(.fileWriteOutOfSpace, error.message)
        }
    }
}

/// Runs `body`, setting `flag` when the calling task is cancelled.
func withCancellationFlag<T: Sendable>(
    _ flag: CancellationFlag, _ body: () async throws(FileProviderError) -> T
) async throws(FileProviderError) -> T {
    do {
        return try await withTaskCancellationHandler {
            try await body()
        } onCancel: {
            flag.cancel()
        }
    } catch {
        throw FileProviderError.wrap(error)
    }
}
