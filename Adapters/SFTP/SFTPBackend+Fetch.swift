import Foundation
import ProviderCore

extension SFTPBackend {
    /// The size of one read: libssh2 keeps several requests in flight to fill it.
    static let readSize = 256 * 1024

    /// Streams a file into `destination` in 256 KiB reads, resuming after `offset` bytes.
    ///
    /// Reports progress after every read. Memory use does not depend on the file's size.
    /// - Throws: `noSuchItem` when the item is gone; `invalidArgument` for a folder or a symlink;
    ///   `versionNoLongerAvailable` when `version` is given and the file's content version is
    ///   another one, or when the file changed while it was read; `localIOFailure` when
    ///   `destination` cannot be written; `serverUnreachable` when the connection breaks (the
    ///   bytes written so far stay in `destination`, so the engine can resume); `cancelled`.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let path = try SFTPPath(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let flag = CancellationFlag()
        return try await withConnection(flag) { connection throws(FileProviderError) -> Item in
            try self.download(
                path, version: version, to: destination.path, offset: offset, progress: progress, cancellation: flag,
                on: connection)
        }
    }

    private func download(
        _ path: SFTPPath, version: ItemVersion?, to destination: String, offset: Int64, progress: ProgressHandler?,
        cancellation: CancellationFlag, on connection: SFTPConnection
    ) throws(FileProviderError) -> Item {
        let located = try locate(path, on: connection)
        let item = located.item
        guard item.kind == .file else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; it has no contents to fetch")
        }
        if let version, version.content != item.version.content {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed; the requested version is gone")
        }
        let file = try connection.openForReading(located.remote)
        // What was opened must be what was looked up (not a symlink swapped in meanwhile).
        let opened = try file.attributes()
        guard opened.kind == .file, Self.version(of: opened, kind: .file).content == item.version.content else {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed while it was opened; fetch it again")
        }
        let start = offset > 0 && offset <= item.size ? offset : 0
        let output = try LocalFile.openDestination(destination, keeping: start)
        if start > 0 { file.seek(to: start) }
        progress?(start, item.size)

        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Int(max(1, min(Int64(Self.readSize), item.size - start))), alignment: 16)
        defer { buffer.deallocate() }
        var completed = start
        while completed < item.size {
            try cancellation.check()
            // Never ask for more than the listed size: libssh2 sends read-ahead requests to fill
            // the buffer, and for a small file those (and a last read for the end) cost a round
            // trip each.
            let wanted = Int(min(Int64(Self.readSize), item.size - completed))
            let count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]))
            if count == 0 { break }
            try output.writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            completed += Int64(count)
            progress?(completed, item.size)
        }
        try? file.close()
        if completed != item.size {
            throw FileProviderError(
                .versionNoLongerAvailable,
                "\(path.display) changed while it was read (\(completed) bytes, expected \(item.size)); fetch it again")
        }
        return item
    }
}
