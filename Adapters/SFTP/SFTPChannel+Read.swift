import AdapterKit
import CLibSSH2
import Foundation
import ProviderCore

// Transfers over the second channel: what the server allows (limits@openssh.com), and
// downloads in large reads, several in flight, each reply's data read straight into the
// caller's buffer. The stream both directions use is SFTPStream; uploads are in
// SFTPChannel+Write.swift.

/// A file opened for reading on an ``SFTPChannel``.
struct ChannelFile {
    var handle: [UInt8]
    /// The path on the server, for messages.
    var path: String
}

extension SFTPChannel {
    /// The reads kept in flight by ``read(_:_:chunk:into:on:cancellation:stop:write:advanced:)``.
    static let readsInFlight = 4
    /// The largest read or write asked for: 63 pages, so that pieces start on page boundaries
    /// (OpenSSH takes up to 255 KiB).
    static let largestTransfer = 252 * 1024

    /// The largest power of two up to `limit` (a whole number of pages, at least 32 KiB): the
    /// size of one read. Each piece is written where it belongs in the local file, and pieces
    /// that start on power-of-two boundaries let the page cache keep the file in large folios;
    /// in 252 KiB pieces (63 pages) it is kept in small ones, and reading it back from the page
    /// cache takes about 12% longer (512 MiB: 0.046 s against 0.041 s). ``readsInFlight(for:)``
    /// keeps the bytes in flight the same.
    static func alignedReadSize(_ limit: Int) -> Int {
        guard limit > 0 else { return limit }
        return 1 << (Int.bitWidth - 1 - limit.leadingZeroBitCount)
    }

    /// How many reads of `chunk` bytes are kept in flight: about 1 MiB, at least 4 and at most
    /// 32 (the least chunk is 32 KiB).
    static func readsInFlight(for chunk: Int) -> Int { min(32, max(readsInFlight, (1 << 20) / max(1, chunk))) }

    /// What one read may ask for and get in full, and what one write may carry, from the
    /// server's `limits@openssh.com`, in whole pages up to ``largestTransfer``; `nil` when the
    /// server does not offer it or says less than 32 KiB (then transfers go through libssh2,
    /// whose requests carry 30,000 bytes). Asked once per channel.
    /// - Throws: `serverUnreachable` when the connection breaks or the reply is malformed.
    func transferLimits(on connection: SFTPConnection) throws(FileProviderError) -> (read: Int, write: Int)? {
        if let known = knownLimits { return known.read > 0 ? known : nil }
        knownLimits = (0, 0)
        guard offers("limits@openssh.com") else { return nil }
        var packets = PacketWriter()
        let id = packets.append(Packet.extended, id: takeID(), [Array("limits@openssh.com".utf8)])
        try send(packets.bytes, on: connection)
        var reply = try replies(to: [id], on: connection)[0]
        guard reply.type == Packet.extendedReply else { return nil }
        _ = try reply.reader.u64()  // the largest packet
        let read = try reply.reader.u64()
        let write = try reply.reader.u64()
        func usable(_ limit: UInt64) -> Int {
            limit < 32 * 1024 ? 0 : Int(min(limit, UInt64(Self.largestTransfer))) / 4096 * 4096
        }
        guard usable(read) > 0, usable(write) > 0 else { return nil }
        knownLimits = (Self.alignedReadSize(usable(read)), usable(write))
        return knownLimits
    }

    /// Opens a file for reading and reads its attributes through the handle.
    ///
    /// - Throws: the error of the SFTP status the server answered with, naming `path`;
    ///   `serverUnreachable` when the connection breaks or a reply is malformed.
    func openForReading(_ path: String, on connection: SFTPConnection) throws(FileProviderError)
        -> (file: ChannelFile, attributes: RemoteAttributes)
    {
        var packets = PacketWriter()
        // SSH_FXP_OPEN: the path, SSH_FXF_READ, no attributes.
        let openID = packets.append(Packet.open, id: takeID(), [Array(path.utf8)], trailing: [0, 0, 0, 1, 0, 0, 0, 0])
        try send(packets.bytes, on: connection)
        var opened = try replies(to: [openID], on: connection)[0]
        let handle = try opened.string(expecting: Packet.handle, "open", path).get()
        let file = ChannelFile(handle: handle, path: path)
        do throws(FileProviderError) {
            var status = PacketWriter()
            let statusID = status.append(Packet.fileStatus, id: takeID(), [handle])
            try send(status.bytes, on: connection)
            var reply = try replies(to: [statusID], on: connection)[0]
            switch reply.type {
            case Packet.attributes: return (file, try reply.reader.attributes())
            case Packet.status:
                throw SFTPStatus.error(UInt(try reply.reader.u32()), operation: "stat", path: path)
            default: throw Reply.unexpected(reply.type, "stat", path)
            }
        } catch {
            if !connection.isDead { closeWithoutWaiting(handle, on: connection) }
            throw error
        }
    }

    /// What ``lookUp(_:resolving:handle:on:)`` found: the real path of the folder asked for
    /// (when one was), the attributes of the path itself (not following a symlink) and those of
    /// the open file asked for (when one was), each an outcome of its own.
    struct LookedUp {
        var resolved: Result<[UInt8], FileProviderError>?
        var attributes: Result<RemoteAttributes, FileProviderError>
        var opened: Result<RemoteAttributes, FileProviderError>?
    }

    /// The requests of a lookup: REALPATH of a folder, LSTAT of a path, FSTAT of a handle.
    struct LookUpRequests {
        var packets: [UInt8]
        var resolveID: UInt32?
        var statusID: UInt32
        var fileStatusID: UInt32?
        var ids: [UInt32] { [resolveID, statusID, fileStatusID].compactMap { $0 } }
    }

    /// Makes the requests of a lookup of `path`: LSTAT, with REALPATH of `folder` and FSTAT of
    /// `handle` when given.
    func lookUpRequests(_ path: String, resolving folder: String?, handle: [UInt8]? = nil) -> LookUpRequests {
        var packets = PacketWriter()
        let resolveID = folder.map { packets.append(Packet.realPath, id: takeID(), [Array($0.utf8)]) }
        let statusID = packets.append(Packet.linkStatus, id: takeID(), [Array(path.utf8)])
        let fileStatusID = handle.map { packets.append(Packet.fileStatus, id: takeID(), [$0]) }
        return LookUpRequests(packets: packets.bytes, resolveID: resolveID, statusID: statusID, fileStatusID: fileStatusID)
    }

    /// What the replies to `requests` say.
    ///
    /// - Throws: `serverUnreachable` when a reply is missing or malformed. What the server
    ///   refused is in the result, as the error of its SFTP status naming the path.
    static func lookedUp(
        _ requests: LookUpRequests, replies: [UInt32: Reply], path: String, folder: String?
    ) throws(FileProviderError) -> LookedUp {
        func reply(_ id: UInt32) throws(FileProviderError) -> Reply {
            guard let reply = replies[id] else { throw FileProviderError(.serverUnreachable, "no reply to SFTP request \(id)") }
            return reply
        }
        func attributes(_ id: UInt32) throws(FileProviderError) -> Result<RemoteAttributes, FileProviderError> {
            var answer = try reply(id)
            switch answer.type {
            case Packet.attributes: return .success(try answer.reader.attributes())
            case Packet.status:
                return .failure(SFTPStatus.error(UInt(try answer.reader.u32()), operation: "stat", path: path))
            default: throw Reply.unexpected(answer.type, "stat", path)
            }
        }
        var found = LookedUp(attributes: try attributes(requests.statusID))
        if let id = requests.resolveID {
            var answer = try reply(id)
            found.resolved = try answer.firstName("resolve", folder ?? "")
        }
        if let id = requests.fileStatusID { found.opened = try attributes(id) }
        return found
    }

    /// LSTAT of `path`, with REALPATH of `folder` (the caller checks that the folder is reached
    /// without a symlink) and FSTAT of `handle` when given, in one round trip.
    ///
    /// - Throws: `serverUnreachable` when the connection breaks or a reply is malformed. What
    ///   the server refused is in the result, as the error of its SFTP status naming the path.
    func lookUp(_ path: String, resolving folder: String?, handle: [UInt8]? = nil, on connection: SFTPConnection)
        throws(FileProviderError) -> LookedUp
    {
        let requests = lookUpRequests(path, resolving: folder, handle: handle)
        try send(requests.packets, on: connection)
        let ids = requests.ids
        let answers = try replies(to: ids, on: connection)
        return try Self.lookedUp(
            requests, replies: Dictionary(uniqueKeysWithValues: zip(ids, answers)), path: path, folder: folder)
    }

    /// Reads `range` of `file` over this channel; see
    /// ``RangeReader/read(_:_:chunk:into:over:cancellation:stop:write:advanced:)``.
    func read(
        _ file: ChannelFile, _ range: Range<Int64>, chunk: Int, into buffer: UnsafeMutableRawBufferPointer,
        on connection: SFTPConnection, cancellation: CancellationFlag, stop: () -> Bool,
        write: (UnsafeRawBufferPointer, Int64) throws(FileProviderError) -> Void,
        advanced: (Int64) -> Void, trailing: TrailingRequests? = nil
    ) throws(FileProviderError) {
        try RangeReader.read(
            file, range, chunk: chunk, into: buffer, over: Stream(channel: self, connection: connection),
            cancellation: cancellation, stop: stop, write: write, advanced: advanced, trailing: trailing)
    }

    /// The channel as ``RangeReader`` and ``RangeWriter`` use it.
    struct Stream: SFTPStream {
        let channel: SFTPChannel
        let connection: SFTPConnection

        func nextID() -> UInt32 { channel.takeID() }
        func send(_ packet: [UInt8]) throws(FileProviderError) { try channel.send(packet, on: connection) }
        func send(_ bytes: UnsafeRawBufferPointer) throws(FileProviderError) { try channel.send(bytes, on: connection) }
        func receive(into buffer: UnsafeMutableRawBufferPointer) throws(FileProviderError) {
            try channel.readExactly(into: buffer, on: connection)
        }
        func forget(_ ids: [UInt32]) {
            if !connection.isDead { channel.forgotten.formUnion(ids) }
        }
        func isForgotten(_ id: UInt32) -> Bool { channel.forgotten.remove(id) != nil }
    }
}

/// An SFTP channel's byte stream as ``RangeReader`` and ``RangeWriter`` need it (a protocol,
/// so tests can play the server's part).
protocol SFTPStream {
    /// A fresh request id.
    func nextID() -> UInt32
    /// Sends whole packets.
    func send(_ packet: [UInt8]) throws(FileProviderError)
    /// Sends whole packets from memory the caller owns.
    func send(_ bytes: UnsafeRawBufferPointer) throws(FileProviderError)
    /// Fills `buffer` with the next bytes from the server.
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(FileProviderError)
    /// Drops the replies to these requests when they arrive.
    func forget(_ ids: [UInt32])
    /// Whether the reply with this id is one to drop (then it is no longer awaited).
    func isForgotten(_ id: UInt32) -> Bool
}

extension SFTPStream {
    func receive(_ count: Int) throws(FileProviderError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let failure = bytes.withUnsafeMutableBytes { buffer -> FileProviderError? in
            do throws(FileProviderError) {
                try receive(into: buffer)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// The header of the next reply that is awaited: its type, its id and how many bytes of
    /// it follow. Replies to forgotten requests are read and dropped on the way, through
    /// `buffer`.
    /// - Throws: `serverUnreachable` when the connection breaks or a reply's length is under 5
    ///   or over 1 MiB.
    func nextReply(through buffer: UnsafeMutableRawBufferPointer) throws(FileProviderError)
        -> (type: UInt8, id: UInt32, bodyLength: Int)
    {
        while true {
            var header = SFTPReader(try receive(9))
            let length = Int(try header.u32())
            let type = try header.byte()
            let id = try header.u32()
            guard length >= 5, length < 1 << 20 else {
                throw FileProviderError(.serverUnreachable, "an SFTP reply of \(length) bytes")
            }
            guard isForgotten(id) else { return (type, id, length - 5) }
            var left = length - 5
            while left > 0 {
                let part = min(left, buffer.count)
                try receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<part]))
                left -= part
            }
        }
    }
}

/// Requests sent along with the last reads of a range (a check after a ranged read: the file's
/// attributes), so they cost no round trip of their own, and what became of them.
final class TrailingRequests {
    /// The packets, made with ids of the channel.
    let packets: [UInt8]
    let ids: [UInt32]
    /// Whether they were sent.
    fileprivate(set) var sent = false
    /// Whether a read went out after them (the rest of a short reply): a server may then have
    /// answered them before that read.
    fileprivate(set) var readAfter = false
    /// The replies that arrived while the range was read, by id.
    fileprivate(set) var replies: [UInt32: Reply] = [:]

    init(packets: [UInt8], ids: [UInt32]) {
        self.packets = packets
        self.ids = ids
    }

    /// The ids sent and not answered yet.
    var unanswered: [UInt32] { sent ? ids.filter { replies[$0] == nil } : [] }
}

/// Reads a range of a file opened on an SFTP channel with several large reads in flight.
enum RangeReader {
    /// Reads `range` of `file` in reads of `chunk` bytes, ``SFTPChannel/readsInFlight(for:)``
    /// of them in flight, and gives each reply's bytes to `write` with their offset as they arrive
    /// (in any order the server answers). `advanced` is told how many more bytes from the
    /// start of the range are written without a gap.
    ///
    /// A reply shorter than asked is followed by a read of the rest. Stops (without an error)
    /// before the next reply when `stop` says so; replies still on their way are dropped
    /// when they arrive. `trailing` requests go out with the last reads; their replies that
    /// arrive meanwhile are kept in it, the others are the caller's to read (and are dropped
    /// when the read fails or stops).
    /// - Throws: `versionNoLongerAvailable` when the file ends before `range` does; the error of
    ///   the SFTP status the server answered with; `serverUnreachable` when the connection
    ///   breaks or a reply is malformed (longer than asked, lengths that disagree, an id never
    ///   sent); what `write` throws; `cancelled`.
    static func read(
        _ file: ChannelFile, _ range: Range<Int64>, chunk: Int, into buffer: UnsafeMutableRawBufferPointer,
        over stream: some SFTPStream, cancellation: CancellationFlag, stop: () -> Bool,
        write: (UnsafeRawBufferPointer, Int64) throws(FileProviderError) -> Void,
        advanced: (Int64) -> Void, trailing: TrailingRequests? = nil
    ) throws(FileProviderError) {
        precondition(chunk > 0 && buffer.count >= chunk)
        typealias Packet = SFTPChannel.Packet
        var next = range.lowerBound
        let inFlight = SFTPChannel.readsInFlight(for: chunk)
        var pending: [UInt32: (offset: Int64, length: Int)] = [:]
        // Pieces written past the gap-free prefix: start → end.
        var finished: [Int64: Int64] = [:]
        var prefix = range.lowerBound
        var completed = false
        defer {
            if !pending.isEmpty { stream.forget(Array(pending.keys)) }
            if !completed, let trailing, !trailing.unanswered.isEmpty { stream.forget(trailing.unanswered) }
        }
        func ask(_ offset: Int64, _ length: Int, into packets: inout PacketWriter) {
            let id = packets.appendRead(id: stream.nextID(), handle: file.handle, offset: offset, length: length)
            pending[id] = (offset, length)
            if trailing?.sent == true { trailing?.readAfter = true }
        }
        func fill() throws(FileProviderError) {
            var packets = PacketWriter()
            while pending.count < inFlight, next < range.upperBound {
                let length = Int(min(Int64(chunk), range.upperBound - next))
                ask(next, length, into: &packets)
                next += Int64(length)
            }
            var bytes = packets.bytes
            if let trailing, !trailing.sent, next == range.upperBound {
                bytes += trailing.packets
                trailing.sent = true
            }
            if !bytes.isEmpty { try stream.send(bytes) }
        }
        try fill()
        while prefix < range.upperBound {
            try cancellation.check()
            if stop() { return }
            let (type, id, bodyLength) = try stream.nextReply(through: buffer)
            guard let request = pending.removeValue(forKey: id) else {
                if let trailing, trailing.sent, trailing.ids.contains(id), trailing.replies[id] == nil {
                    trailing.replies[id] = Reply(type: type, reader: SFTPReader(try stream.receive(bodyLength)))
                    continue
                }
                throw FileProviderError(.serverUnreachable, "the server answered an SFTP request that was not made (id \(id))")
            }
            switch type {
            case Packet.data:
                guard bodyLength >= 4 else { throw malformed(file) }
                var field = SFTPReader(try stream.receive(4))
                let count = Int(try field.u32())
                guard count + 4 == bodyLength, count <= request.length else { throw malformed(file) }
                if count == 0 { throw ended(file, at: request.offset, range) }
                let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
                try stream.receive(into: piece)
                try write(UnsafeRawBufferPointer(piece), request.offset)
                if count < request.length {
                    var packets = PacketWriter()
                    ask(request.offset + Int64(count), request.length - count, into: &packets)
                    try stream.send(packets.bytes)
                }
                finished[request.offset] = request.offset + Int64(count)
                let before = prefix
                while let end = finished.removeValue(forKey: prefix) { prefix = end }
                if prefix > before { advanced(prefix - before) }
            case Packet.status:
                var body = SFTPReader(try stream.receive(bodyLength))
                let code = try body.u32()
                if code == SFTPChannel.endOfFile { throw ended(file, at: request.offset, range) }
                throw SFTPStatus.error(UInt(code), operation: "read", path: file.path)
            default:
                throw Reply.unexpected(type, "read", file.path)
            }
            try fill()
        }
        completed = true
    }

    private static func malformed(_ file: ChannelFile) -> FileProviderError {
        FileProviderError(.serverUnreachable, "read \(file.path): the server sent a malformed DATA reply")
    }

    private static func ended(_ file: ChannelFile, at offset: Int64, _ range: Range<Int64>) -> FileProviderError {
        FileProviderError(
            .versionNoLongerAvailable,
            "\(file.path) ended at \(offset) bytes while it was read, expected at least \(range.upperBound); fetch it again")
    }
}

extension PacketWriter {
    /// Appends SSH_FXP_READ: the handle, the offset and the length.
    mutating func appendRead(id: UInt32, handle: [UInt8], offset: Int64, length: Int) -> UInt32 {
        append(
            SFTPChannel.Packet.read, id: id, [handle],
            trailing: Self.u64(UInt64(offset)) + Self.u32(UInt32(length)))
    }
}
