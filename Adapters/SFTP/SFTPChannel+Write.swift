import AdapterKit
import Foundation
import ProviderCore

// Uploads over the second channel: large writes, several in flight, each request's data read
// from the local file straight into the buffer that is sent.

extension SFTPChannel {
    /// The writes kept in flight by ``RangeWriter``.
    static let writesInFlight = 4

    /// Opens an existing file for writing at any offset, without truncating it.
    ///
    /// - Throws: the error of the SFTP status the server answered with, naming `path`;
    ///   `serverUnreachable` when the connection breaks or a reply is malformed.
    func openForWriting(_ path: String, on connection: SFTPConnection) throws(FileProviderError) -> ChannelFile {
        var packets = PacketWriter()
        // SSH_FXP_OPEN: the path, SSH_FXF_WRITE, no attributes.
        let id = packets.append(Packet.open, id: takeID(), [Array(path.utf8)], trailing: [0, 0, 0, 2, 0, 0, 0, 0])
        try send(packets.bytes, on: connection)
        var reply = try replies(to: [id], on: connection)[0]
        return ChannelFile(handle: try reply.string(expecting: Packet.handle, "open", path).get(), path: path)
    }

    /// Creates a new file for writing with permissions `mode` (SSH_FXF_WRITE, CREAT, TRUNC and
    /// EXCL): fails when something is at `path`.
    ///
    /// - Throws: the error of the SFTP status the server answered with, naming `path`
    ///   (`filenameCollision` when something is there); `serverUnreachable` when the connection
    ///   breaks or a reply is malformed.
    func createExclusive(_ path: String, mode: UInt32 = 0o644, on connection: SFTPConnection) throws(FileProviderError)
        -> ChannelFile
    {
        var packets = PacketWriter()
        // SSH_FXP_OPEN: the path, WRITE | CREAT | TRUNC | EXCL, the permissions attribute.
        let id = packets.append(
            Packet.open, id: takeID(), [Array(path.utf8)],
            trailing: PacketWriter.u32(0x3a) + PacketWriter.u32(0x4) + PacketWriter.u32(mode & 0o7777))
        try send(packets.bytes, on: connection)
        var reply = try replies(to: [id], on: connection)[0]
        return ChannelFile(handle: try reply.string(expecting: Packet.handle, "create", path).get(), path: path)
    }

    /// Finishes a small new file in one round trip: WRITE of its `count` bytes (at most what one
    /// write may carry), FSETSTAT of its dates when `times` are given, FSTAT when `describe`,
    /// and CLOSE, sent together; the server handles requests on one handle in order. `fill`
    /// copies the file's bytes into the part of the packet it is given before anything is sent.
    /// The file is closed whatever happens (once the requests are sent, by their CLOSE).
    ///
    /// Returns the attributes FSTAT read (just before the close), or `nil` without `describe`.
    /// - Throws: what `fill` throws; the error of the first SFTP status that is not OK (a full
    ///   disk is a plain failure), naming the path; `serverUnreachable` when the connection
    ///   breaks or a reply is malformed.
    func writeAndClose(
        _ file: ChannelFile, count: Int, times: (modification: Int64, access: Int64)?, describe: Bool,
        on connection: SFTPConnection, fill: (UnsafeMutableRawBufferPointer) throws(FileProviderError) -> Void
    ) throws(FileProviderError) -> RemoteAttributes? {
        var packets = PacketWriter()
        var ids: [UInt32] = []
        if count > 0 {
            ids.append(
                packets.append(
                    Packet.write, id: takeID(), [file.handle], trailing: PacketWriter.u64(0) + PacketWriter.u32(UInt32(count)),
                    dataLength: count))
        }
        var bytes = packets.bytes
        if count > 0 {
            let start = bytes.count
            bytes += repeatElement(0, count: count)
            let failure = bytes.withUnsafeMutableBytes { buffer -> FileProviderError? in
                do throws(FileProviderError) {
                    try fill(UnsafeMutableRawBufferPointer(rebasing: buffer[start..<(start + count)]))
                    return nil
                } catch {
                    return error
                }
            }
            if let failure {
                closeWithoutWaiting(file.handle, on: connection)
                throw failure
            }
        }
        var rest = PacketWriter()
        if let times {
            // ATTRS with SSH_FILEXFER_ATTR_ACMODTIME: the access, then the modification time.
            ids.append(
                rest.append(
                    Packet.setFileStatus, id: takeID(), [file.handle],
                    trailing: PacketWriter.u32(0x8) + PacketWriter.u32(UInt32(truncatingIfNeeded: times.access))
                        + PacketWriter.u32(UInt32(truncatingIfNeeded: times.modification))))
        }
        let statusID = describe ? rest.append(Packet.fileStatus, id: takeID(), [file.handle]) : nil
        if let statusID { ids.append(statusID) }
        let closeID = rest.append(Packet.close, id: takeID(), [file.handle])
        ids.append(closeID)
        bytes += rest.bytes
        try send(bytes, on: connection)
        var attributes: RemoteAttributes?
        var failure: FileProviderError?
        for (id, var reply) in zip(ids, try replies(to: ids, on: connection)) {
            let operation = id == statusID ? "stat" : id == closeID ? "close" : count > 0 && id == ids[0] ? "write" : "set the dates of"
            switch reply.type {
            case Packet.attributes where id == statusID:
                attributes = try reply.reader.attributes()
            case Packet.status:
                let code = try reply.reader.u32()
                if code != 0 && failure == nil { failure = SFTPStatus.error(UInt(code), operation: operation, path: file.path) }
            default:
                throw Reply.unexpected(reply.type, operation, file.path)
            }
        }
        if let failure { throw failure }
        return attributes
    }

    /// Closes a file and waits for the answer: a server may report a failed write only then.
    ///
    /// - Throws: the error of the SFTP status the server answered with, naming the path;
    ///   `serverUnreachable` when the connection breaks or the reply is not a status.
    func close(_ file: ChannelFile, on connection: SFTPConnection) throws(FileProviderError) {
        let code = try request(packetType: Packet.close, [file.handle], on: connection)
        if code != 0 { throw SFTPStatus.error(UInt(code), operation: "close", path: file.path) }
    }

    /// Writes `range` of `file` over this channel; see
    /// ``RangeWriter/write(_:_:chunk:through:over:cancellation:stop:fill:)``.
    func write(
        _ file: ChannelFile, _ range: Range<Int64>, chunk: Int, through buffer: UnsafeMutableRawBufferPointer,
        on connection: SFTPConnection, cancellation: CancellationFlag, stop: () -> Bool,
        fill: (UnsafeMutableRawBufferPointer, Int64) throws(FileProviderError) -> Void
    ) throws(FileProviderError) {
        try RangeWriter.write(
            file, range, chunk: chunk, through: buffer, over: Stream(channel: self, connection: connection),
            cancellation: cancellation, stop: stop, fill: fill)
    }
}

/// Writes a range of a file opened on an SFTP channel with several large writes in flight.
enum RangeWriter {
    /// The bytes of an SSH_FXP_WRITE before its data, for a file's handle.
    static func headerSize(_ file: ChannelFile) -> Int { 4 + 1 + 4 + 4 + file.handle.count + 8 + 4 }

    /// Writes `range` of `file` in writes of `chunk` bytes, ``SFTPChannel/writesInFlight`` of
    /// them in flight. `fill` copies the bytes at the file offset it is given into the part of
    /// the buffer it is given (all of it); `buffer` holds ``headerSize(_:)`` plus `chunk` bytes.
    /// Returns once the server acknowledged every write, or (without an error) before the next
    /// acknowledgment when `stop` says so; acknowledgments still on their way are dropped
    /// when they arrive.
    /// - Throws: the error of the first SFTP status that is not OK (a full disk is a plain
    ///   failure); `serverUnreachable` when the connection breaks or a reply is malformed or
    ///   answers a request never sent; what `fill` throws; `cancelled`.
    static func write(
        _ file: ChannelFile, _ range: Range<Int64>, chunk: Int, through buffer: UnsafeMutableRawBufferPointer,
        over stream: some SFTPStream, cancellation: CancellationFlag, stop: () -> Bool,
        fill: (UnsafeMutableRawBufferPointer, Int64) throws(FileProviderError) -> Void
    ) throws(FileProviderError) {
        let header = headerSize(file)
        precondition(chunk > 0 && buffer.count >= header + chunk)
        var next = range.lowerBound
        var pending: Set<UInt32> = []
        defer { if !pending.isEmpty { stream.forget(Array(pending)) } }
        while next < range.upperBound || !pending.isEmpty {
            try cancellation.check()
            if stop() { return }
            while pending.count < SFTPChannel.writesInFlight, next < range.upperBound {
                let count = Int(min(Int64(chunk), range.upperBound - next))
                try fill(UnsafeMutableRawBufferPointer(rebasing: buffer[header..<(header + count)]), next)
                let id = stream.nextID()
                var fields = PacketWriter()
                fields.append(
                    SFTPChannel.Packet.write, id: id, [file.handle],
                    trailing: PacketWriter.u64(UInt64(next)) + PacketWriter.u32(UInt32(count)), dataLength: count)
                fields.bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: header) }
                try stream.send(UnsafeRawBufferPointer(rebasing: buffer[0..<(header + count)]))
                pending.insert(id)
                next += Int64(count)
            }
            // The buffer's last write is sent: it can take the replies to drop.
            let (type, id, bodyLength) = try stream.nextReply(through: buffer)
            guard pending.remove(id) != nil else {
                throw FileProviderError(.serverUnreachable, "the server answered an SFTP request that was not made (id \(id))")
            }
            guard type == SFTPChannel.Packet.status, bodyLength >= 4 else { throw Reply.unexpected(type, "write", file.path) }
            var body = SFTPReader(try stream.receive(bodyLength))
            let code = try body.u32()
            if code != 0 { throw SFTPStatus.error(UInt(code), operation: "write", path: file.path) }
        }
    }
}
