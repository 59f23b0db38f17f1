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
