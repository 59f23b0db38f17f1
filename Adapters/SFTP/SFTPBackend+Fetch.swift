import Foundation
import ProviderCore

extension SFTPBackend {
    /// The size of one read: libssh2 keeps several requests in flight to fill it.
    static let readSize = 256 * 1024
    /// Files with at least this much left to transfer are split into ranges that several
    /// connections transfer at once.
    static let rangedTransferThreshold: Int64 = 16 << 20
    /// The size of one range of a ranged transfer.
    static let rangeSize: Int64 = 8 << 20
    /// The most connections one ranged transfer uses (the operation's own and free ones): one
    /// per processor, at least two. libssh2 decrypts on the calling thread, so a connection
    /// is bound by one core; more connections than cores only add switching (measured on 2
    /// cores: 2 connections beat 1 and 4).
    static let connectionsPerTransfer = max(2, ProcessInfo.processInfo.activeProcessorCount)

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
        progress?(start, item.size)
        if item.size - start >= Self.rangedTransferThreshold && connections > 1 {
            try downloadRanges(located, opened: file, from: start, to: output, progress: progress, cancellation: cancellation)
            try? file.close()
            return item
        }
        if start > 0 { file.seek(to: start) }

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

    /// Downloads `start..<size` in ranges, on this connection and on pool connections that are
    /// free now, each with its own handle.
    ///
    /// Each range is read whole into memory and written only after every range before it, so
    /// the destination always holds a contiguous prefix, even if the process is killed: the
    /// engine resumes from its size. Memory: one range per connection.
    /// - Throws: the first error of a range (the others stop); the prefix written so far stays.
    private func downloadRanges(
        _ located: LocatedItem, opened file: SFTPFile, from start: Int64, to output: LocalFile,
        progress: ProgressHandler?, cancellation: CancellationFlag
    ) throws(FileProviderError) {
        let item = located.item
        let schedule = RangeSchedule(from: start, to: item.size, rangeSize: Self.rangeSize)
        let remote = located.remote
        let helpers = pool.lend(upTo: min(connections, Self.connectionsPerTransfer) - 1) {
            connection throws(FileProviderError) in
            let file = try connection.openForReading(remote)
            let opened = try file.attributes()
            // A helper opening another file than the one checked just does not help.
            guard opened.kind == .file, Self.version(of: opened, kind: .file).content == item.version.content else {
                return
            }
            Self.readRanges(of: file, schedule, to: output, size: item.size, progress: progress, cancellation: cancellation)
        }
        Self.readRanges(of: file, schedule, to: output, size: item.size, progress: progress, cancellation: cancellation)
        helpers.wait()
        if let error = schedule.error { throw error }
        if schedule.writtenPrefix != item.size {
            throw FileProviderError(
                .versionNoLongerAvailable, "\(located.path.display) changed while it was read; fetch it again")
        }
    }

    /// Reads the ranges `schedule` hands out and writes each one when its turn comes; stops at
    /// the first error, which it gives to `schedule` (so the other connections stop too).
    private static func readRanges(
        of file: SFTPFile, _ schedule: RangeSchedule, to output: LocalFile, size: Int64, progress: ProgressHandler?,
        cancellation: CancellationFlag
    ) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(schedule.rangeSize), alignment: 16)
        defer { buffer.deallocate() }
        while let range = schedule.take() {
            do throws(FileProviderError) {
                try cancellation.check()
                let part = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(range.count)])
                let count = try file.read(at: range.lowerBound, into: part, pieceSize: readSize)
                if count != part.count {
                    throw FileProviderError(
                        .versionNoLongerAvailable,
                        "\(file.path) ended at \(range.lowerBound + Int64(count)) bytes while it was read, expected \(size); fetch it again")
                }
                guard schedule.waitForTurn(range) else { return }
                try output.write(UnsafeRawBufferPointer(part), at: range.lowerBound)
                progress?(range.upperBound, size)
                schedule.wrote(range)
            } catch {
                schedule.fail(error)
                return
            }
        }
    }
}
