import AdapterKit
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
    /// Transfers of at least this much go over the second channel (see
    /// ``readRangesOverChannel(_:on:_:to:helper:cancellation:yield:)`` and
    /// ``writeRangesOverChannel(from:to:on:_:cancellation:yield:)``); smaller ones would pay
    /// its extra open and close for little.
    static let channelTransferThreshold: Int64 = 2 << 20

    /// The most connections a ranged transfer uses (the operation's own and free ones).
    ///
    /// libssh2 encrypts and decrypts on the calling thread, one 16-byte block per OpenSSL call,
    /// so a connection keeps one of our cores busy: one connection per core, and when the
    /// server runs on this machine (its sshd busy on the same cores), one per two cores.
    /// Transfers take at least two. Downloads: our decryption costs about twice the server's
    /// encryption, so a second connection uses what sshd leaves idle (measured on 2 cores with
    /// a local sshd: 2.45 s instead of 2.60 s per GiB). Uploads: with libssh2's writes a second
    /// connection was slower on 2 cores (2.5–2.7 s instead of 2.4 s per GiB); with the large
    /// writes over the second channel it is faster (1 GiB: 3.45 s instead of 4.68 s median, 8
    /// alternating runs each on a busy VM, and 6.6 instead of 7.5 CPU-s with sshd).
    func connectionsPerTransfer() -> Int {
        if let streamsPerTransfer { return min(connections, streamsPerTransfer) }
        let cores = ProcessInfo.processInfo.activeProcessorCount
        // Asked during an operation, so a connection has resolved the settings.
        let ours = target.current?.isLocal ?? false ? max(1, cores / 2) : cores
        return min(connections, max(2, ours))
    }

    /// Streams a file into `destination` in 256 KiB reads, resuming after `offset` bytes.
    ///
    /// Files with 16 MiB or more left go in ranges over several connections (see
    /// ``transfer(_:opened:on:from:to:over:progress:cancellation:)``). Reports progress after
    /// every read. Memory use does not depend on the file's size.
    /// - Throws: `noSuchItem` when the item is gone; `invalidArgument` for a folder or a symlink;
    ///   `versionNoLongerAvailable` when `version` is given and the file's content version is
    ///   another one, or when the file changed while it was read; `fileWriteOutOfSpace` when
    ///   the disk holding `destination` is full, `localIOFailure` when it cannot be written for
    ///   another reason; `serverUnreachable` when the connection breaks (the
    ///   prefix written without a gap stays in `destination`, so the engine can resume);
    ///   `cancelled`.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let path = try SFTPPath(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let flag = CancellationFlag()
        // The engine's sink for the bytes written (task-local: taken here).
        let sink = ContentSink.for(destination)
        return try await withConnection(flag, operation: "GET", path: path, moved: { $0.size }) {
            connection throws(FileProviderError) -> Item in
            try self.download(
                path, version: version, to: destination.path, offset: offset, progress: progress, cancellation: flag,
                sink: sink, on: connection)
        }
    }

    func download(
        _ path: SFTPPath, version: ItemVersion?, to destination: String, offset: Int64, progress: ProgressHandler?,
        cancellation: CancellationFlag, sink: ContentSink?, on connection: SFTPConnection
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
        var start = offset > 0 && offset <= item.size ? offset : 0
        // A ranged download that was killed may have written past the prefix it recorded.
        if start > 0, let recorded = PrefixRecord.recorded(atPath: destination), recorded < start {
            start = max(0, recorded)
        }
        let output = try LocalFile.openDestination(destination, keeping: start)
        output.sink = sink
        progress?(start, item.size)
        let streams = connectionsPerTransfer()
        let ranged = item.size - start >= Self.rangedTransferThreshold && streams > 1 && output.recordPrefix(start)
        try transfer(
            located, opened: file, on: connection, from: start, to: output, over: ranged ? streams : 1, progress: progress,
            cancellation: cancellation)
        try? file.close()
        return item
    }

    /// Downloads `start..<size`: in one piece on this connection, or in ranges over this
    /// connection and up to `streams - 1` pool connections that are free now, each with its own
    /// handle. Every piece is written at its place as soon as it arrives.
    ///
    /// Ranges finish out of order, so the file may hold bytes past a gap. What counts is the
    /// prefix written without a gap: progress reports it, it is recorded on the file (an
    /// extended attribute, updated as whole ranges complete and removed at the end) so that a
    /// resume after a kill starts there, and after a failure the file is cut back to it.
    /// Memory: one 256 KiB buffer per connection.
    /// - Throws: the first error of a range (the others stop); `versionNoLongerAvailable` when
    ///   the file ends early.
    private func transfer(
        _ located: LocatedItem, opened file: SFTPFile, on connection: SFTPConnection, from start: Int64,
        to output: LocalFile, over streams: Int, progress: ProgressHandler?, cancellation: CancellationFlag
    ) throws(FileProviderError) {
        let item = located.item
        let ranged = streams > 1
        let rangeSize = ranged ? Self.rangeSize : max(1, item.size - start)
        let schedule = RangeSchedule(from: start, to: item.size, rangeSize: rangeSize) { prefix, rangesCompleted in
            if ranged && rangesCompleted { _ = output.recordPrefix(prefix) }
            progress?(prefix, item.size)
        }
        let remote = located.remote
        let overChannel = item.size - start >= Self.channelTransferThreshold
        sharing(streams, settledBy: schedule) { connection, yield throws(FileProviderError) in
            if overChannel,
                try Self.readRangesOverChannel(
                    located, on: connection, schedule, to: output, helper: true, cancellation: cancellation,
                    yield: yield)
            {
                return
            }
            let file = try connection.openForReading(remote)
            let opened = try file.attributes()
            // A helper opening another file than the one checked just does not help.
            guard opened.kind == .file, Self.version(of: opened, kind: .file).content == item.version.content else {
                return
            }
            Self.readRanges(of: file, schedule, to: output, size: item.size, cancellation: cancellation, yield: yield)
        } _: {
            do throws(FileProviderError) {
                if overChannel,
                    try Self.readRangesOverChannel(
                        located, on: connection, schedule, to: output, helper: false, cancellation: cancellation,
                        yield: { false })
                {
                    return
                }
            } catch {
                schedule.fail(error)
                return
            }
            Self.readRanges(of: file, schedule, to: output, size: item.size, cancellation: cancellation) { false }
        }
        let prefix = schedule.writtenPrefix
        guard
            let error = schedule.error
                ?? (prefix == item.size
                    ? nil
                    : FileProviderError(
                        .versionNoLongerAvailable, "\(located.path.display) changed while it was read; fetch it again"))
        else {
            // Also a record left by an earlier, killed download: it must not reach the replica.
            output.forgetPrefix()
            return
        }
        // Keep exactly the prefix: what is past it may have gaps.
        if ranged {
            if (try? output.truncate(to: prefix)) != nil { output.forgetPrefix() } else { _ = output.recordPrefix(prefix) }
        }
        throw error
    }

    /// Reads the ranges `schedule` hands out over the connection's second SFTP channel, in
    /// reads as large as the server answers in full (`limits@openssh.com`, up to 252 KiB, four
    /// in flight) instead of libssh2's 30,000-byte ones, each reply read straight into the
    /// buffer that is written out. Fewer, larger requests cost the server less CPU per byte
    /// and spare a copy on our side. Opens the file on the channel and checks it is the
    /// version being downloaded; stops like ``readRanges(of:_:to:size:cancellation:yield:)``.
    ///
    /// Returns `false` when the connection has no second channel or the server does not say
    /// how much a read may ask for: then libssh2 reads. A helper (`helper`) that opened another
    /// version returns `true` without reading: it just does not help.
    /// - Throws: `versionNoLongerAvailable` when this connection's own open found another
    ///   version; what opening the file throws. Errors while reading go to `schedule`.
    private static func readRangesOverChannel(
        _ located: LocatedItem, on connection: SFTPConnection, _ schedule: RangeSchedule, to output: LocalFile,
        helper: Bool, cancellation: CancellationFlag, yield: () -> Bool
    ) throws(FileProviderError) -> Bool {
        guard let channel = try connection.transferChannel(), let chunk = try channel.transferLimits(on: connection)?.read
        else {
            return false
        }
        let item = located.item
        let (file, attributes) = try channel.openForReading(located.remote, on: connection)
        defer { if !connection.isDead { channel.closeWithoutWaiting(file.handle, on: connection) } }
        guard attributes.kind == .file, Self.version(of: attributes, kind: .file).content == item.version.content else {
            if helper { return true }
            throw FileProviderError(
                .versionNoLongerAvailable, "\(located.path.display) changed while it was opened; fetch it again")
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        schedule.work(yielding: yield) { range throws(FileProviderError) in
            try channel.read(
                file, range, chunk: chunk, into: buffer, on: connection, cancellation: cancellation,
                stop: { schedule.error != nil },
                write: { piece, offset throws(FileProviderError) in try output.write(piece, at: offset) },
                advanced: { schedule.wrote($0, in: range) })
        }
        return true
    }

    /// Reads the ranges `schedule` hands out and writes every piece at its place; stops at the
    /// first error, which it gives to `schedule` (so the other connections stop too), and
    /// before a new range when `yield` says the connection is wanted elsewhere.
    ///
    /// libssh2 keeps requests for up to four times the buffer ahead of what it returned, and a
    /// seek throws away what was asked for beyond: so the reads shrink towards the end of a
    /// range, and no byte past it is requested (then sent, decrypted and dropped). The last
    /// range only never asks for more than is left (what is asked past the end of the file
    /// comes back empty).
    private static func readRanges(
        of file: SFTPFile, _ schedule: RangeSchedule, to output: LocalFile, size: Int64, cancellation: CancellationFlag,
        yield: () -> Bool
    ) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Int(min(Int64(readSize), schedule.rangeSize)), alignment: 16)
        defer { buffer.deallocate() }
        schedule.work(yielding: yield) { range throws(FileProviderError) in
            file.seek(to: range.lowerBound)
            var offset = range.lowerBound
            while offset < range.upperBound {
                try cancellation.check()
                if schedule.error != nil { return }
                let left = range.upperBound - offset
                let wanted = Int(min(Int64(readSize), range.upperBound == size ? left : max(1, left / 4)))
                let count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]))
                if count == 0 {
                    throw FileProviderError(
                        .versionNoLongerAvailable,
                        "\(file.path) ended at \(offset) bytes while it was read, expected \(size); fetch it again")
                }
                try output.write(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), at: offset)
                offset += Int64(count)
                schedule.wrote(Int64(count), in: range)
            }
        }
    }
}
