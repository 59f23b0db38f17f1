import AdapterKit
import Foundation
import ProviderCore

/// Downloads a batch of small files over a connection's second SFTP channel in three round
/// trips for the whole batch, where one file at a time takes six (REALPATH of its folder,
/// LSTAT, OPEN, FSTAT, READ, CLOSE, each waiting for the one before):
///
/// 1. REALPATH of each folder (once per folder) and LSTAT of each file, all sent at once: a
///    folder reached through a symlink, a missing file, something that is not a file or not
///    of the version asked for fails here, and nothing else is sent for it (a FIFO is never
///    opened).
/// 2. OPEN of each file that passed.
/// 3. For each open file: FSTAT (what was opened must be the version looked up), READs of
///    the whole file in reads of the size the server answers in full, and CLOSE, all sent at
///    once. Each DATA reply is written at its offset as it arrives.
///
/// Every reply is matched by id and checked where it enters: a reply to a request never made,
/// a DATA reply longer than asked or whose lengths disagree gives the connection up (what
/// follows on it cannot be trusted) and fails the files not finished with
/// `serverUnreachable`. A file the server ends early is `versionNoLongerAvailable`; a file
/// whose reply was shorter than asked (a server may answer less) is left ``Outcome/incomplete``
/// for the caller to fetch the ordinary way.
///
/// Memory: one buffer of one read for the batch, and one open local file per file.
struct PipelinedFetch {
    let backend: SFTPBackend
    let channel: SFTPChannel
    let connection: SFTPConnection
    /// What one read asks for (the server's limit, see ``SFTPChannel/transferLimits(on:)``).
    let chunk: Int
    let cancellation: CancellationFlag
    let progress: BatchProgressHandler?

    /// One file of the batch.
    struct File {
        /// Its index in the engine's batch.
        var index: Int
        var path: SFTPPath
        /// The absolute path on the server.
        var remote: String
        var version: ItemVersion?
        /// The engine's file for the contents.
        var destination: String
        var sink: ContentSink?
    }

    enum Outcome {
        case done(Item)
        case failed(FileProviderError)
        /// The server answered a read with fewer bytes than asked.
        case incomplete
    }

    private typealias Packet = SFTPChannel.Packet

    /// Runs the three rounds; returns each file's outcome by its index in the engine's batch.
    /// - Throws: `serverUnreachable` when the connection broke or the server broke the
    ///   protocol (the connection is given up then); `cancelled` when the task was cancelled
    ///   before the first round.
    func run(_ files: [File]) throws(FileProviderError) -> [(Int, Outcome)] {
        try cancellation.check()
        var outcomes: [Int: Outcome] = [:]
        do throws(FileProviderError) {
            let found = try lookUp(files, failing: &outcomes)
            if cancellation.isCancelled {
                for file in found.map(\.file) { outcomes[file.index] = .failed(FileProviderError(.cancelled, "cancelled")) }
                return files.map { ($0.index, outcomes[$0.index] ?? .failed(FileProviderError(.cancelled, "cancelled"))) }
            }
            let opened = try open(found, failing: &outcomes)
            try read(opened, into: &outcomes)
        } catch {
            // A broken reply: nothing more on this channel can be trusted.
            if !connection.isDead { connection.abandon() }
            throw error
        }
        return files.map { ($0.index, outcomes[$0.index] ?? .failed(FileProviderError(.cancelled, "cancelled"))) }
    }

    // MARK: Round 1: REALPATH of the folders, LSTAT of the files

    private func lookUp(_ files: [File], failing outcomes: inout [Int: Outcome]) throws(FileProviderError)
        -> [(file: File, item: Item)]
    {
        var packets = PacketWriter()
        var folders: [String: (id: UInt32, path: SFTPPath)] = [:]
        var ids: [UInt32] = []
        var statusIDs: [UInt32] = []
        for file in files {
            if file.path.components.count > 1 {
                let folder = file.path.parent.remote(under: connection.rootPath)
                if folders[folder] == nil {
                    let id = packets.append(Packet.realPath, id: channel.takeID(), [Array(folder.utf8)])
                    folders[folder] = (id, file.path.parent)
                    ids.append(id)
                }
            }
            let id = packets.append(Packet.linkStatus, id: channel.takeID(), [Array(file.remote.utf8)])
            statusIDs.append(id)
            ids.append(id)
        }
        try channel.send(packets.bytes, on: connection)
        var replies = Dictionary(uniqueKeysWithValues: zip(ids, try channel.replies(to: ids, on: connection)))
        // The folders that cannot be used: missing, or reached through a symlink.
        var refused: [String: FileProviderError] = [:]
        for (folder, request) in folders {
            switch try replies[request.id]!.firstName("resolve", folder) {
            case .success(let name):
                if !name.elementsEqual(folder.utf8) { refused[folder] = backend.symlinkRefused(request.path) }
            case .failure(let error): refused[folder] = error
            }
        }
        var found: [(file: File, item: Item)] = []
        for (file, id) in zip(files, statusIDs) {
            do throws(FileProviderError) {
                if file.path.components.count > 1, let refusal = refused[file.path.parent.remote(under: connection.rootPath)] {
                    throw refusal
                }
                var reply = replies.removeValue(forKey: id)!
                let attributes: RemoteAttributes
                switch reply.type {
                case Packet.attributes: attributes = try reply.reader.attributes()
                case Packet.status:
                    throw SFTPStatus.error(UInt(try reply.reader.u32()), operation: "stat", path: file.remote)
                default: throw Reply.unexpected(reply.type, "stat", file.remote)
                }
                guard let kind = attributes.kind else { throw FileProviderError.noSuchItem(file.path.identifier) }
                guard kind == .file else {
                    throw FileProviderError(.invalidArgument, "\(file.path.display) is not a file; it has no contents to fetch")
                }
                guard let item = try backend.makeItem(path: file.path, attributes: attributes, on: connection) else {
                    throw FileProviderError.noSuchItem(file.path.identifier)
                }
                if let version = file.version, version.content != item.version.content {
                    throw FileProviderError(.versionNoLongerAvailable, "\(file.path.display) changed; the requested version is gone")
                }
                found.append((file, item))
            } catch where error.code == .serverUnreachable {
                // A malformed reply, or the server saying the connection is lost.
                throw error
            } catch {
                outcomes[file.index] = .failed(error)
            }
        }
        return found
    }

    // MARK: Round 2: OPEN

    private func open(_ found: [(file: File, item: Item)], failing outcomes: inout [Int: Outcome])
        throws(FileProviderError) -> [(file: File, item: Item, handle: [UInt8])]
    {
        if found.isEmpty { return [] }
        var packets = PacketWriter()
        var ids: [UInt32] = []
        for (file, _) in found {
            // SSH_FXP_OPEN: the path, SSH_FXF_READ, no attributes.
            ids.append(
                packets.append(Packet.open, id: channel.takeID(), [Array(file.remote.utf8)], trailing: [0, 0, 0, 1, 0, 0, 0, 0]))
        }
        try channel.send(packets.bytes, on: connection)
        var opened: [(file: File, item: Item, handle: [UInt8])] = []
        for ((file, item), var reply) in zip(found, try channel.replies(to: ids, on: connection)) {
            switch try reply.string(expecting: Packet.handle, "open", file.remote) {
            case .success(let handle): opened.append((file, item, handle))
            case .failure(let error): outcomes[file.index] = .failed(error)
            }
        }
        return opened
    }

    // MARK: Round 3: FSTAT, READs and CLOSE of each open file

    /// What a request of round 3 was.
    private enum Request {
        case fileStatus(Int)
        case read(Int, offset: Int64, length: Int)
        case close
    }

    /// A file of round 3 as its replies arrive.
    private struct Reading {
        var file: File
        var item: Item
        var output: LocalFile?
        var written: Int64 = 0
        var failure: FileProviderError?
        var short = false
    }

    private func read(_ opened: [(file: File, item: Item, handle: [UInt8])], into outcomes: inout [Int: Outcome])
        throws(FileProviderError)
    {
        if opened.isEmpty { return }
        var files: [Reading] = []
        var pending: [UInt32: Request] = [:]
        var packets = PacketWriter()
        for (position, (file, item, handle)) in opened.enumerated() {
            var reading = Reading(file: file, item: item)
            do throws(FileProviderError) {
                let output = try LocalFile.openDestination(file.destination, keeping: 0)
                output.sink = file.sink
                reading.output = output
                progress?(file.index, 0, item.size)
                pending[packets.append(Packet.fileStatus, id: channel.takeID(), [handle])] = .fileStatus(position)
                var offset: Int64 = 0
                while offset < item.size {
                    let length = Int(min(Int64(chunk), item.size - offset))
                    let id = packets.appendRead(id: channel.takeID(), handle: handle, offset: offset, length: length)
                    pending[id] = .read(position, offset: offset, length: length)
                    offset += Int64(length)
                }
            } catch {
                reading.failure = error
            }
            pending[packets.append(Packet.close, id: channel.takeID(), [handle])] = .close
            files.append(reading)
        }
        try channel.send(packets.bytes, on: connection)
        let stream = SFTPChannel.Stream(channel: channel, connection: connection)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        while !pending.isEmpty {
            let (type, id, bodyLength) = try stream.nextReply(through: buffer)
            guard let request = pending.removeValue(forKey: id) else {
                throw FileProviderError(.serverUnreachable, "the server answered an SFTP request that was not made (id \(id))")
            }
            switch request {
            case .close:
                // A failed close of a file only read does not matter.
                _ = try stream.receive(bodyLength)
            case .fileStatus(let position):
                var reply = Reply(type: type, reader: SFTPReader(try stream.receive(bodyLength)))
                let path = files[position].file.remote
                switch reply.type {
                case Packet.attributes:
                    let attributes = try reply.reader.attributes()
                    // What was opened must be what was looked up (not a symlink swapped in meanwhile).
                    if attributes.kind != .file
                        || SFTPBackend.version(of: attributes, kind: .file).content != files[position].item.version.content
                    {
                        files[position].failure =
                            files[position].failure
                            ?? FileProviderError(
                                .versionNoLongerAvailable,
                                "\(files[position].file.path.display) changed while it was opened; fetch it again")
                    }
                case Packet.status:
                    let code = try reply.reader.u32()
                    files[position].failure =
                        files[position].failure ?? SFTPStatus.error(UInt(code), operation: "stat", path: path)
                default: throw Reply.unexpected(reply.type, "stat", path)
                }
            case .read(let position, let offset, let length):
                let path = files[position].file.remote
                switch type {
                case Packet.data:
                    guard bodyLength >= 4 else { throw Self.malformed(path) }
                    var field = SFTPReader(try stream.receive(4))
                    let count = Int(try field.u32())
                    guard count + 4 == bodyLength, count <= length else { throw Self.malformed(path) }
                    let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
                    try stream.receive(into: piece)
                    if count == 0 {
                        files[position].failure = files[position].failure ?? Self.ended(files[position], at: offset)
                    } else if count < length {
                        files[position].short = true
                    }
                    guard files[position].failure == nil, !files[position].short, let output = files[position].output else {
                        continue
                    }
                    do throws(FileProviderError) {
                        try output.write(UnsafeRawBufferPointer(piece), at: offset)
                        files[position].written += Int64(count)
                    } catch {
                        files[position].failure = error
                    }
                case Packet.status:
                    var body = SFTPReader(try stream.receive(bodyLength))
                    let code = try body.u32()
                    files[position].failure =
                        files[position].failure
                        ?? (code == SFTPChannel.endOfFile
                            ? Self.ended(files[position], at: offset)
                            : SFTPStatus.error(UInt(code), operation: "read", path: path))
                default:
                    throw Reply.unexpected(type, "read", path)
                }
            }
        }
        for reading in files {
            let index = reading.file.index
            if let failure = reading.failure {
                outcomes[index] = .failed(failure)
            } else if reading.short || reading.written != reading.item.size {
                outcomes[index] = .incomplete
            } else {
                reading.output?.forgetPrefix()
                progress?(index, reading.item.size, reading.item.size)
                outcomes[index] = .done(reading.item)
            }
        }
    }

    private static func malformed(_ path: String) -> FileProviderError {
        FileProviderError(.serverUnreachable, "read \(path): the server sent a malformed DATA reply")
    }

    private static func ended(_ reading: Reading, at offset: Int64) -> FileProviderError {
        FileProviderError(
            .versionNoLongerAvailable,
            "\(reading.file.path.display) ended at \(offset) bytes while it was read, expected \(reading.item.size); fetch it again"
        )
    }
}
