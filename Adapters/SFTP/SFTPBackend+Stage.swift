import AdapterKit
import Foundation
import ProviderCore

/// A file uploaded to a staging name, not yet renamed into place.
struct StagedFile {
    /// The absolute path on the server.
    var path: String
    /// Its attributes just before it was closed, when ``SFTPBackend/stage(_:in:modificationTime:describe:on:cancellation:)``
    /// was asked for them.
    var attributes: RemoteAttributes?
}

extension SFTPBackend {
    /// The buffer an upload streams through: up to this much is in flight (1 and 2 MiB measured
    /// best; 4 MiB cost more client CPU).
    static let writeSize = 2 * 1024 * 1024

    /// Uploads `contents` (nothing for an empty file) to a new staging file in `folder` and
    /// returns it; the caller renames it into place or removes it.
    ///
    /// With `modificationTime`, the file's dates are set through the open handle; with
    /// `describe`, its attributes are read from the handle just before it is closed (a rename
    /// keeps them), which spares the caller a look-up after the rename. The bytes read from
    /// `contents` also go to `sink` (the engine's ``ContentSink``), each at its offset.
    /// - Throws: `localIOFailure` when `contents` cannot be read; `insufficientQuota` when the
    ///   server is out of space; `permissionDenied`; `cancelled`.
    func stage(
        _ contents: URL?, in folder: String, modificationTime: Int64? = nil, describe: Bool = false,
        sink: ContentSink? = nil, on connection: SFTPConnection, cancellation: CancellationFlag
    ) throws(FileProviderError) -> StagedFile {
        let staging = (folder == "/" ? "" : folder) + "/" + SFTPPath.stagingName()
        if let staged = try stageInOneRoundTrip(
            contents, at: staging, in: folder, modificationTime: modificationTime, describe: describe, sink: sink,
            on: connection)
        {
            return staged
        }
        let output = try connection.createExclusive(staging)
        var attributes: RemoteAttributes?
        do throws(FileProviderError) {
            if let contents {
                let input = try LocalFile.openForReading(contents.path)
                input.sink = sink
                try upload(
                    input, to: output, on: connection, staging: staging,
                    cancellation: cancellation)
            }
            if let modificationTime {
                let now = Int64(Date().timeIntervalSince1970.rounded(.down))
                try output.setTimes(modification: modificationTime, access: now)
            }
            if describe { attributes = try output.attributes() }
            try output.close()
        } catch {
            if connection.isDead { throw error }
            try? output.close()
            try? connection.unlink(staging)
            throw quotaAware(error, folder: folder, on: connection)
        }
        return StagedFile(path: staging, attributes: attributes)
    }

    /// ``stage(_:in:modificationTime:describe:sink:on:cancellation:)`` for contents that fit in
    /// one write, over the connection's second channel: the staging file is created (one round
    /// trip), then its bytes, its dates, the look at its attributes and its close go together
    /// (one round trip) instead of four requests each waiting for the one before. `nil` when it
    /// does not apply (no second channel, no write size from the server, larger contents):
    /// then nothing was sent.
    /// - Throws: what ``stage(_:in:modificationTime:describe:sink:on:cancellation:)`` throws;
    ///   the staging file is removed after a failure.
    private func stageInOneRoundTrip(
        _ contents: URL?, at staging: String, in folder: String, modificationTime: Int64?, describe: Bool,
        sink: ContentSink?, on connection: SFTPConnection
    ) throws(FileProviderError) -> StagedFile? {
        guard let upload = try SmallFileUpload(on: connection) else { return nil }
        let input = try contents.map { url throws(FileProviderError) in try LocalFile.openForReading(url.path) }
        let size = try input?.size() ?? 0
        guard size <= Int64(upload.writeLimit) else { return nil }
        input?.sink = sink
        let file = try upload.createExclusive(staging)
        do throws(FileProviderError) {
            let attributes = try upload.write(
                input, size: size, to: file, modificationTime: modificationTime, describe: describe)
            return StagedFile(path: staging, attributes: attributes)
        } catch {
            if connection.isDead { throw error }
            try? connection.unlink(staging)
            throw quotaAware(error, folder: folder, on: connection)
        }
    }

    /// Uploads `input` (as long as it is now) into the staging file: in one piece through
    /// `output` (on `connection`), or, from 16 MiB on, in ranges on this connection and on pool
    /// connections that are free now (see ``connectionsPerTransfer()``), each with its
    /// own handle on the staging file. The order of the ranges does not matter: the staging
    /// file is renamed into place only once every range is written. From 2 MiB on, each
    /// connection writes over its second channel where the server allows large writes (see
    /// ``writeRangesOverChannel(from:to:on:_:cancellation:yield:)``).
    /// - Throws: the first error of a range (the others stop); `localIOFailure` when `input`
    ///   became shorter meanwhile.
    private func upload(
        _ input: LocalFile, to output: SFTPFile, on connection: SFTPConnection, staging: String,
        cancellation: CancellationFlag
    ) throws(FileProviderError) {
        let size = try input.size()
        let streams = size >= Self.rangedTransferThreshold ? connectionsPerTransfer() : 1
        let schedule = RangeSchedule(from: 0, to: size, rangeSize: streams > 1 ? Self.rangeSize : max(1, size))
        let overChannel = size >= Self.channelTransferThreshold
        sharing(streams) { connection, yield throws(FileProviderError) in
            if overChannel,
                try Self.writeRangesOverChannel(
                    from: input, to: staging, on: connection, schedule, cancellation: cancellation, yield: yield)
            {
                return
            }
            let file = try connection.openForWriting(staging)
            Self.writeRanges(from: input, to: file, schedule, cancellation: cancellation, yield: yield)
            do throws(FileProviderError) {
                // The server may report a failed write only now.
                try file.close()
            } catch {
                schedule.fail(error)
            }
        } _: {
            do throws(FileProviderError) {
                if overChannel,
                    try Self.writeRangesOverChannel(
                        from: input, to: staging, on: connection, schedule, cancellation: cancellation,
                        yield: { false })
                {
                    return
                }
            } catch {
                schedule.fail(error)
                return
            }
            Self.writeRanges(from: input, to: output, schedule, cancellation: cancellation) { false }
        }
        if let error = schedule.error { throw error }
    }

    /// Writes the ranges `schedule` hands out over the connection's second SFTP channel, with
    /// its own handle on the staging file, in writes as large as the server takes
    /// (`limits@openssh.com`, up to 252 KiB, four in flight) instead of libssh2's 30,000-byte
    /// ones, each read from `input` straight into the packet that is sent. Fewer, larger
    /// writes cost the server fewer system calls and acknowledgments. Errors go to `schedule`;
    /// the handle is closed (and its answer waited for) before returning.
    ///
    /// Returns `false` when the connection has no second channel or the server does not say
    /// how large a write may be: then libssh2 writes.
    /// - Throws: what opening the staging file on the channel throws.
    private static func writeRangesOverChannel(
        from input: LocalFile, to staging: String, on connection: SFTPConnection, _ schedule: RangeSchedule,
        cancellation: CancellationFlag, yield: () -> Bool
    ) throws(FileProviderError) -> Bool {
        guard let channel = try connection.transferChannel(),
            let chunk = try channel.transferLimits(on: connection)?.write
        else {
            return false
        }
        let file = try channel.openForWriting(staging, on: connection)
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: RangeWriter.headerSize(file) + chunk, alignment: 16)
        defer { buffer.deallocate() }
        schedule.work(yielding: yield) { range throws(FileProviderError) in
            try channel.write(
                file, range, chunk: chunk, through: buffer, on: connection, cancellation: cancellation,
                stop: { schedule.error != nil },
                fill: { part, offset throws(FileProviderError) in
                    guard try input.read(into: part, at: offset) == part.count else {
                        throw FileProviderError(
                            .localIOFailure, "\(input.path) became shorter while it was uploaded; it is sent again later")
                    }
                })
        }
        if connection.isDead { return true }
        do throws(FileProviderError) {
            try channel.close(file, on: connection)
        } catch {
            schedule.fail(error)
        }
        return true
    }

    /// Writes the ranges `schedule` hands out, read from `input`; stops at the first error,
    /// which it gives to `schedule` (so the other connections stop too), and before a new range
    /// when `yield` says the connection is wanted elsewhere.
    private static func writeRanges(
        from input: LocalFile, to file: SFTPFile, _ schedule: RangeSchedule, cancellation: CancellationFlag,
        yield: () -> Bool
    ) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: Int(min(Int64(writeSize), schedule.rangeSize)), alignment: 16)
        defer { buffer.deallocate() }
        schedule.work(yielding: yield) { range throws(FileProviderError) in
            try file.write(count: Int64(range.count), at: range.lowerBound, through: buffer) {
                part, offset throws(FileProviderError) in
                try cancellation.check()
                guard try input.read(into: part, at: offset) == part.count else {
                    throw FileProviderError(
                        .localIOFailure, "\(input.path) became shorter while it was uploaded; it is sent again later")
                }
            }
        }
    }

    /// OpenSSH reports a full disk as a plain failure; ask the server how much space is left.
    func quotaAware(_ error: FileProviderError, folder: String, on connection: SFTPConnection) -> FileProviderError {
        guard error.code == .cannotSynchronize, let free = connection.freeBytes(folder), free < UInt64(Self.writeSize)
        else { return error }
        return FileProviderError(
            .insufficientQuota, "the server \(connection.endpoint) is out of space in \(folder) (\(error.message))")
    }

    /// Moves a staging file over `target`, replacing it atomically with posix-rename where the
    /// server offers it; otherwise the old file is moved aside first and removed after.
    ///
    /// The file moved aside is named `.fileprovider-staging-<UUID>.replaced`: hidden from
    /// listings, but never removed as an abandoned staging file, since after a kill between
    /// the two renames it holds the only copy of the item's previous version.
    func replace(_ target: String, with staging: String, on connection: SFTPConnection) throws(FileProviderError) {
        if try connection.posixRename(staging, to: target) { return }
        let aside = (target as NSString).deletingLastPathComponent + "/" + SFTPPath.stagingName() + ".replaced"
        try connection.rename(target, to: aside)
        do throws(FileProviderError) {
            try connection.rename(staging, to: target)
        } catch {
            try? connection.rename(aside, to: target)
            throw error
        }
        try? connection.unlink(aside)
    }

    /// Sets a staged file's modification time so the new version differs from `current`.
    func stamp(
        _ staging: String, current: RemoteAttributes?, explicit: Date?, on connection: SFTPConnection
    ) throws(FileProviderError) {
        let explicitSeconds = explicit.map { Int64($0.timeIntervalSince1970.rounded(.down)) }
        guard current != nil || explicitSeconds != nil else { return }
        let staged = try connection.lstat(staging)
        let time =
            current.map { Self.modificationTime(for: staged, current: $0, explicit: explicitSeconds) }
            ?? explicitSeconds!
        if time != staged.modificationTime {
            try connection.setTimes(staging, modification: time, access: staged.accessTime)
        }
    }

    /// Whether the remote file holds exactly the bytes of `contents`.
    func remoteFile(_ remote: String, size: Int64, matches contents: URL?, on connection: SFTPConnection)
        throws(FileProviderError) -> Bool
    {
        guard let contents else { return size == 0 }
        let input = try LocalFile.openForReading(contents.path)
        guard try input.size() == size else { return false }
        let file = try connection.openForReading(remote)
        let left = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readSize, alignment: 16)
        let right = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readSize, alignment: 16)
        defer {
            left.deallocate()
            right.deallocate()
        }
        while true {
            var count = 0
            while count < right.count {
                let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: right[count...]))
                if got == 0 { break }
                count += got
            }
            let wanted = max(count, 1)
            let local = try input.read(into: UnsafeMutableRawBufferPointer(rebasing: left[0..<wanted]))
            if count == 0 { return local == 0 }
            if local != count || memcmp(left.baseAddress!, right.baseAddress!, count) != 0 { return false }
        }
    }
}
