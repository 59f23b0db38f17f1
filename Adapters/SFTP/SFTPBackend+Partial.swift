import AdapterKit
import Foundation
import ProviderCore

/// A file a connection keeps open on one of its channels between ranged reads of it.
struct ReadHandle {
    /// The absolute path on the server.
    var remote: String
    var file: ChannelFile
    /// The content version the file had when it was opened and checked.
    var content: Data
    /// The attributes read last (through the handle, or of the path after a read).
    var attributes: RemoteAttributes
    /// When a read last used it (`DispatchTime` nanoseconds).
    var lastUsed: UInt64
}

/// The files a channel keeps open for ranged reads, the most recently used last: a reader that
/// reads one file in many ranges (a program reading a dataless file) pays the open, the checks
/// and the close once, not per range.
struct ReadHandles {
    /// The most files one channel keeps open.
    static let capacity = 4
    private(set) var handles: [ReadHandle] = []

    /// Takes the handle of `remote` out, if one is kept.
    mutating func take(_ remote: String) -> ReadHandle? {
        guard let index = handles.firstIndex(where: { $0.remote.hasSameBytes(as: remote) }) else { return nil }
        return handles.remove(at: index)
    }

    /// Keeps `handle` (as the most recently used); returns the handles pushed out beyond
    /// ``capacity``, to be closed.
    mutating func keep(_ handle: ReadHandle) -> [ReadHandle] {
        handles.append(handle)
        guard handles.count > Self.capacity else { return [] }
        let evicted = Array(handles.prefix(handles.count - Self.capacity))
        handles.removeFirst(evicted.count)
        return evicted
    }

    /// Takes out the handles last used before `time`, to be closed.
    mutating func takeIdle(before time: UInt64) -> [ReadHandle] {
        let idle = handles.filter { $0.lastUsed < time }
        handles.removeAll { $0.lastUsed < time }
        return idle
    }
}

/// Closes the files ranged reads keep open once none was used for ``idleTime``: armed by each
/// read, it sweeps every channel of every connection of the pool once the reads stop.
final class IdleHandleSweeper: @unchecked Sendable {
    /// How long a file stays open after its last ranged read, in nanoseconds.
    let idleTime: UInt64
    private let pool: ConnectionPool
    private let lock = NSLock()
    private var armed = false
    private var lastActivity: UInt64 = 0

    init(pool: ConnectionPool, idleTime: UInt64) {
        self.pool = pool
        self.idleTime = idleTime
    }

    /// Notes that a ranged read ended now; arms a sweep if none is armed.
    func noteActivity() {
        let now = DispatchTime.now().uptimeNanoseconds
        let arm = lock.withLock { () -> Bool in
            lastActivity = now
            if armed { return false }
            armed = true
            return true
        }
        if arm { self.arm(at: now + idleTime) }
    }

    private func arm(at deadline: UInt64) {
        DispatchQueue.global().asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline)) { [weak self] in
            self?.sweep()
        }
    }

    /// Closes the kept files last used more than ``idleTime`` before `now` (`DispatchTime`
    /// nanoseconds; a test passes a later time to sweep at once), on every connection's own
    /// thread: the closes run after this returns.
    func sweep(now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        let cutoff = now > idleTime ? now - idleTime : 0
        pool.forEachConnection { connection in
            // Both channels: a small read keeps its file on the second channel while the
            // channel through `ssh` is not open yet, a large one on that channel.
            for channel in connection.openChannels {
                for handle in channel.readHandles.takeIdle(before: cutoff) {
                    channel.closeWithoutWaiting(handle.file.handle, on: connection)
                }
            }
        }
        let next = lock.withLock { () -> UInt64? in
            if lastActivity > cutoff { return lastActivity + idleTime }
            armed = false
            return nil
        }
        if let next { arm(at: next) }
    }
}

extension SFTPBackend {
    /// How long a file stays open on a connection after its last ranged read: 5 s.
    static let readHandleIdleTime: UInt64 = 5_000_000_000

    /// Writes bytes `range` of a file (clamped to its size) into `destination` at the same
    /// offsets; never truncates `destination` or writes outside the range.
    ///
    /// Over the connection's second channel (servers with `limits@openssh.com`): the file is
    /// looked up (LSTAT, and REALPATH of its folder), opened and checked through the handle
    /// (size and modification time: the content version), then read in the largest
    /// power-of-two reads the server answers in full, about 1 MiB in flight, each reply
    /// written at its offset; exactly the range is asked for. Afterwards the path is looked up
    /// again: a file that changed while it was read is not reported as `version`. The handle
    /// stays open on that connection (up to 4 files per connection, closed after 5 s without a
    /// read), so the next read of the same file costs its data and one round trip for the
    /// check. Without the extension the read goes through libssh2, which asks for up to four
    /// times a read ahead (the surplus past the range is dropped, never written). Every piece
    /// written also goes to the engine's ``ContentSink`` for `destination`, if there is one.
    /// - Throws: `invalidArgument` for a folder or a symlink, or an empty range or one starting
    ///   below 0; `noSuchItem` when the item is gone or reached through a symlink;
    ///   `versionNoLongerAvailable` when the file's content version is not `version.content`,
    ///   or it changed while it was read; `corruptData` when the server sent fewer bytes than
    ///   the clamped range while the file stayed the same, a reply longer than asked or
    ///   otherwise malformed (the connection is then dropped), or a size no file can have;
    ///   `fileWriteOutOfSpace` when the disk holding `destination` is full, `localIOFailure`
    ///   when it cannot be opened or written for another reason; `serverUnreachable` when the
    ///   connection breaks; `cancelled`.
    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try PartialContents.validate(range)
        let path = try SFTPPath(identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
        let flag = CancellationFlag()
        // The engine's hash of the bytes (a whole file filled in place), taken here: task-local
        // values do not reach the connections' threads.
        let sink = ContentSink.for(destination)
        defer { readHandleSweeper.noteActivity() }
        return try await withConnection(
            flag, operation: "READ \(range.lowerBound)-\(range.upperBound - 1)", path: path,
            moved: { Int64($0.range.count) }
        ) { connection throws(FileProviderError) -> PartialContents in
            try self.readPartial(
                path, version: version, range: range, to: destination.path, sink: sink, cancellation: flag, on: connection)
        }
    }

    private func readPartial(
        _ path: SFTPPath, version: ItemVersion, range: Range<Int64>, to destination: String, sink: ContentSink?,
        cancellation: CancellationFlag, on connection: SFTPConnection
    ) throws(FileProviderError) -> PartialContents {
        // A large range opens the channel through ssh; a small one takes it only when it is open
        // already (its handshake would cost more than the read: `head -c 1M` of a dataless file).
        let large = Int64(range.count) >= Self.channelTransferThreshold
        let chosen: SFTPChannel? =
            if large { try connection.transferChannel() } else if let open = connection.openTransferChannel { open } else {
                try connection.extensionChannel()
            }
        guard let channel = chosen,
            let chunk = try channel.transferLimits(on: connection)?.read
        else {
            return try readPartialThroughLibSSH2(
                path, version: version, range: range, to: destination, sink: sink, cancellation: cancellation, on: connection)
        }
        let remote = path.remote(under: connection.rootPath)
        let folder = path.components.count > 1 ? path.parent.remote(under: connection.rootPath) : nil
        let (opened, fresh) = try readHandle(path, remote: remote, folder: folder, version: version, on: channel, connection)
        var handle = opened
        do throws(FileProviderError) {
            let size = handle.attributes.size
            let written = PartialContents.clamp(range, toSize: size)
            let streams = connectionsPerTransfer()
            if Int64(written.count) >= Self.rangedTransferThreshold && streams > 1 {
                // Large: in ranges over this connection and free ones, then checked once more.
                let output = try LocalFile.openForWritingInPlace(destination, sink: sink)
                // Closed here, once the helpers are done: not when their tasks let go of it.
                defer { output.close() }
                try readSharing(
                    written, over: streams, handle: handle, path, remote: remote, folder: folder, version: version,
                    chunk: chunk, to: output, cancellation: cancellation, on: channel, connection)
                handle.attributes = try stillCurrent(path, remote: remote, folder: folder, version: version, on: channel, connection)
            } else if !written.isEmpty {
                let output = try LocalFile.openForWritingInPlace(destination, sink: sink)
                defer { output.close() }
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
                defer { buffer.deallocate() }
                // The check after the read goes out with the last reads: the path looked up
                // again (a file replaced meanwhile) and the open file's attributes (a file
                // changed in place; after the reads of the same handle, so answered after them).
                let check = channel.lookUpRequests(remote, resolving: folder, handle: handle.file.handle)
                let trailing = TrailingRequests(packets: check.packets, ids: check.ids)
                do throws(FileProviderError) {
                    try channel.read(
                        handle.file, written, chunk: chunk, into: buffer, on: connection, cancellation: cancellation,
                        stop: { false },
                        write: { piece, offset throws(FileProviderError) in try output.write(piece, at: offset) },
                        advanced: { _ in }, trailing: trailing)
                } catch {
                    throw explain(error, reading: path, remote: remote, folder: folder, version: version, on: channel, connection)
                }
                var answers = trailing.replies
                let rest = trailing.unanswered
                for (id, reply) in zip(rest, try channel.replies(to: rest, on: connection)) { answers[id] = reply }
                let found = try SFTPChannel.lookedUp(check, replies: answers, path: remote, folder: folder)
                let now = try file(in: found, path, folder: folder)
                let opened = try found.opened?.get()
                guard Self.version(of: now, kind: .file).content == version.content,
                    let opened, Self.version(of: opened, kind: .file).content == version.content
                else {
                    throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed while it was read; fetch it again")
                }
                handle.attributes = now
                if trailing.readAfter {
                    // A read went out after the check (the rest of a short reply): check again.
                    handle.attributes = try stillCurrent(path, remote: remote, folder: folder, version: version, on: channel, connection)
                }
            } else if !fresh {
                // Nothing read through a kept handle: the path is looked up (one round trip).
                handle.attributes = try stillCurrent(path, remote: remote, folder: folder, version: version, on: channel, connection)
            }
            guard let item = try makeItem(path: path, attributes: handle.attributes, on: connection) else {
                throw FileProviderError.noSuchItem(path.identifier)
            }
            handle.lastUsed = DispatchTime.now().uptimeNanoseconds
            for evicted in channel.readHandles.keep(handle) {
                channel.closeWithoutWaiting(evicted.file.handle, on: connection)
            }
            return PartialContents(item: item, range: written)
        } catch {
            if !connection.isDead { channel.closeWithoutWaiting(handle.file.handle, on: connection) }
            throw error
        }
    }

    /// Reads `written` in 8 MiB ranges over this connection and up to `streams - 1` pool
    /// connections that are free now (as whole downloads do), each through the file it keeps
    /// open for ranged reads (opened and checked on first use), every piece written at its
    /// offset. A helper whose file turns out to be another version just does not help; the
    /// caller checks the file once more afterwards.
    ///
    /// - Throws: the first error of a range (the others stop), explained as
    ///   ``explain(_:reading:remote:folder:version:on:_:)`` does.
    private func readSharing(
        _ written: Range<Int64>, over streams: Int, handle: ReadHandle, _ path: SFTPPath, remote: String, folder: String?,
        version: ItemVersion, chunk: Int, to output: LocalFile, cancellation: CancellationFlag, on channel: SFTPChannel,
        _ connection: SFTPConnection
    ) throws(FileProviderError) {
        let schedule = RangeSchedule(from: written.lowerBound, to: written.upperBound, rangeSize: Self.rangeSize)
        @Sendable func work(
            _ handle: ReadHandle, chunk: Int, remote: String, folder: String?, on channel: SFTPChannel,
            _ connection: SFTPConnection, yield: () -> Bool
        ) -> Bool {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
            defer { buffer.deallocate() }
            var failed = false
            schedule.work(yielding: yield) { range throws(FileProviderError) in
                do throws(FileProviderError) {
                    try channel.read(
                        handle.file, range, chunk: chunk, into: buffer, on: connection, cancellation: cancellation,
                        stop: { schedule.error != nil },
                        write: { piece, offset throws(FileProviderError) in try output.write(piece, at: offset) },
                        advanced: { schedule.wrote($0, in: range) })
                } catch {
                    failed = true
                    throw self.explain(
                        error, reading: path, remote: remote, folder: folder, version: version, on: channel, connection)
                }
            }
            return !failed
        }
        sharing(streams, settledBy: schedule) { helper, yield throws(FileProviderError) in
            guard let channel = try helper.transferChannel(), let chunk = try channel.transferLimits(on: helper)?.read else {
                return
            }
            let remote = path.remote(under: helper.rootPath)
            let folder = path.components.count > 1 ? path.parent.remote(under: helper.rootPath) : nil
            var (handle, _) = try self.readHandle(path, remote: remote, folder: folder, version: version, on: channel, helper)
            if work(handle, chunk: chunk, remote: remote, folder: folder, on: channel, helper, yield: yield) {
                handle.lastUsed = DispatchTime.now().uptimeNanoseconds
                for evicted in channel.readHandles.keep(handle) {
                    channel.closeWithoutWaiting(evicted.file.handle, on: helper)
                }
            } else if !helper.isDead {
                channel.closeWithoutWaiting(handle.file.handle, on: helper)
            }
        } _: {
            _ = work(handle, chunk: chunk, remote: remote, folder: folder, on: channel, connection, yield: { false })
        }
        if let error = schedule.error { throw error }
        guard schedule.writtenPrefix == written.upperBound else {
            throw FileProviderError(.corruptData, "\(path.display): the ranged read ended at \(schedule.writtenPrefix)")
        }
    }

    /// A handle of `remote` checked to be the file of `version`: the one this channel kept, or
    /// a fresh one (`true`) after looking the path up and opening it.
    ///
    /// - Throws: `noSuchItem` when nothing is there or its folder is reached through a symlink;
    ///   `invalidArgument` for a folder or a symlink; `corruptData` for a size or date no file
    ///   can have; `versionNoLongerAvailable` when the file is of another version.
    private func readHandle(
        _ path: SFTPPath, remote: String, folder: String?, version: ItemVersion, on channel: SFTPChannel,
        _ connection: SFTPConnection
    ) throws(FileProviderError) -> (ReadHandle, fresh: Bool) {
        if let kept = channel.readHandles.take(remote) {
            if kept.content == version.content { return (kept, false) }
            channel.closeWithoutWaiting(kept.file.handle, on: connection)
        }
        // Looked up before it is opened: opening a FIFO would block the server.
        let attributes = try lookUp(path, remote: remote, folder: folder, on: channel, connection)
        guard Self.version(of: attributes, kind: .file).content == version.content else {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed; the requested version is gone")
        }
        let (file, opened) = try channel.openForReading(remote, on: connection)
        // What was opened must be what was looked up (not a symlink swapped in meanwhile).
        guard opened.kind == .file, opened.problem(for: .file) == nil,
            Self.version(of: opened, kind: .file).content == version.content
        else {
            channel.closeWithoutWaiting(file.handle, on: connection)
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed while it was opened; fetch it again")
        }
        let handle = ReadHandle(
            remote: remote, file: file, content: version.content, attributes: opened,
            lastUsed: DispatchTime.now().uptimeNanoseconds)
        return (handle, true)
    }

    /// The attributes of the file at `remote`, its folder checked to be reached without a
    /// symlink.
    ///
    /// - Throws: `noSuchItem` when nothing is there or the folder is reached through a symlink;
    ///   `invalidArgument` for a folder or a symlink; `corruptData` for a size or date no file
    ///   can have.
    private func lookUp(
        _ path: SFTPPath, remote: String, folder: String?, on channel: SFTPChannel, _ connection: SFTPConnection
    ) throws(FileProviderError) -> RemoteAttributes {
        try file(in: channel.lookUp(remote, resolving: folder, on: connection), path, folder: folder)
    }

    /// The attributes of the file a lookup found, its folder (`folder`, the absolute path on the
    /// server) checked to be reached without a symlink.
    ///
    /// - Throws: what ``lookUp(_:remote:folder:on:_:)`` throws.
    private func file(in found: SFTPChannel.LookedUp, _ path: SFTPPath, folder: String?) throws(FileProviderError)
        -> RemoteAttributes
    {
        if let folder, let resolved = found.resolved {
            guard try resolved.get().elementsEqual(folder.utf8) else { throw symlinkRefused(path) }
        }
        let attributes = try found.attributes.get()
        guard let kind = attributes.kind else { throw FileProviderError.noSuchItem(path.identifier) }
        guard kind == .file else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; it has no contents to fetch")
        }
        if let problem = attributes.problem(for: .file) { throw Self.refusal(path, problem) }
        return attributes
    }

    /// The attributes of the file after a read, checked to be still of `version`.
    ///
    /// - Throws: what ``lookUp(_:remote:folder:on:_:)`` throws; `versionNoLongerAvailable`
    ///   when the file is of another version now.
    private func stillCurrent(
        _ path: SFTPPath, remote: String, folder: String?, version: ItemVersion, on channel: SFTPChannel,
        _ connection: SFTPConnection
    ) throws(FileProviderError) -> RemoteAttributes {
        let attributes = try lookUp(path, remote: remote, folder: folder, on: channel, connection)
        guard Self.version(of: attributes, kind: .file).content == version.content else {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed while it was read; fetch it again")
        }
        return attributes
    }

    /// What a failed read over the channel means for a ranged read.
    ///
    /// A file that ended early is `corruptData` when it is still of `version` (the server sent
    /// fewer bytes than its size), else `versionNoLongerAvailable`. A reply that broke the
    /// protocol (longer than asked, lengths that disagree, an id never sent) leaves the channel
    /// in an unknown state: the connection is dropped and the read is `corruptData`. Other
    /// errors stay as they are.
    private func explain(
        _ error: FileProviderError, reading path: SFTPPath, remote: String, folder: String?, version: ItemVersion,
        on channel: SFTPChannel, _ connection: SFTPConnection
    ) -> FileProviderError {
        switch error.code {
        case .versionNoLongerAvailable:
            do throws(FileProviderError) {
                _ = try stillCurrent(path, remote: remote, folder: folder, version: version, on: channel, connection)
            } catch {
                return error
            }
            return FileProviderError(
                .corruptData, "\(path.display): the server sent fewer bytes than the file's size (\(error.message))")
        case .serverUnreachable where !connection.isDead:
            connection.abandon()
            return FileProviderError(.corruptData, "\(path.display): \(error.message)")
        default:
            return error
        }
    }

    /// A ranged read through libssh2's SFTP API, for servers without `limits@openssh.com`:
    /// looked up, opened, checked through the handle, read in reads of up to 256 KiB (libssh2
    /// asks for up to four times a read ahead; what comes back past the range is dropped, never
    /// written), looked up again, closed.
    ///
    /// - Throws: what ``fetchPartialContents(for:version:range:into:)`` throws.
    private func readPartialThroughLibSSH2(
        _ path: SFTPPath, version: ItemVersion, range: Range<Int64>, to destination: String, sink: ContentSink?,
        cancellation: CancellationFlag, on connection: SFTPConnection
    ) throws(FileProviderError) -> PartialContents {
        let located = try locate(path, on: connection)
        guard located.item.kind == .file else {
            throw FileProviderError(.invalidArgument, "\(path.display) is not a file; it has no contents to fetch")
        }
        guard located.item.version.content == version.content else {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed; the requested version is gone")
        }
        let file = try connection.openForReading(located.remote)
        defer { if !connection.isDead { try? file.close() } }
        let opened = try file.attributes()
        guard opened.kind == .file, Self.version(of: opened, kind: .file).content == version.content else {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed while it was opened; fetch it again")
        }
        let written = PartialContents.clamp(range, toSize: located.item.size)
        if !written.isEmpty {
            let output = try LocalFile.openForWritingInPlace(destination, sink: sink)
            defer { output.close() }
            let buffer = UnsafeMutableRawBufferPointer.allocate(
                byteCount: Int(min(Int64(Self.readSize), Int64(written.count))), alignment: 16)
            defer { buffer.deallocate() }
            file.seek(to: written.lowerBound)
            var offset = written.lowerBound
            while offset < written.upperBound {
                try cancellation.check()
                let wanted = Int(min(Int64(buffer.count), written.upperBound - offset))
                let count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]))
                guard count > 0, count <= wanted else {
                    let now = try connection.lstat(located.remote)
                    if now.kind != .file || Self.version(of: now, kind: .file).content != version.content {
                        throw FileProviderError(
                            .versionNoLongerAvailable, "\(path.display) changed while it was read; fetch it again")
                    }
                    throw FileProviderError(
                        .corruptData,
                        "\(path.display): the server sent \(count == 0 ? "no bytes" : "\(count) bytes for a read of \(wanted)") at \(offset) of \(located.item.size)"
                    )
                }
                try output.write(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), at: offset)
                offset += Int64(count)
            }
        }
        let after = try connection.lstat(located.remote)
        guard after.kind == .file, after.problem(for: .file) == nil,
            Self.version(of: after, kind: .file).content == version.content,
            let item = try makeItem(path: path, attributes: after, on: connection)
        else {
            throw FileProviderError(.versionNoLongerAvailable, "\(path.display) changed while it was read; fetch it again")
        }
        return PartialContents(item: item, range: written)
    }
}
