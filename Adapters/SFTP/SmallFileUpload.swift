import AdapterKit
import Foundation
import ProviderCore

/// The upload of a new file whose contents fit in one SFTP write, over a connection's second
/// channel (``SFTPChannel``), in two round trips: the staging file is created (SSH_FXP_OPEN
/// with WRITE, CREAT, TRUNC and EXCL), then its bytes, its dates, the look at its attributes
/// and its close go together (WRITE, FSETSTAT, FSTAT, CLOSE; the server handles the requests
/// on one handle in order) instead of four requests each waiting for the one before.
///
/// ``SFTPBackend/stage(_:in:modificationTime:describe:sink:on:cancellation:)`` takes it for the
/// contents it applies to (``createExclusive(_:mode:)``, then
/// ``write(_:size:to:modificationTime:describe:)``); larger ones stream (``RangeWriter``,
/// libssh2's writes).
struct SmallFileUpload {
    let channel: SFTPChannel
    let connection: SFTPConnection
    /// The most bytes one write may carry (the server's `limits@openssh.com`).
    let writeLimit: Int

    /// The upload over `connection`'s second channel, or `nil` when there is none or the server
    /// does not say how large a write may be.
    /// - Throws: `serverUnreachable` when the connection breaks while the channel opens or the
    ///   limits are asked.
    init?(on connection: SFTPConnection) throws(FileProviderError) {
        guard let channel = try connection.extensionChannel(), let limit = try channel.transferLimits(on: connection)?.write
        else { return nil }
        self.channel = channel
        self.connection = connection
        writeLimit = limit
    }

    /// Writes the `size` bytes of `input` (nothing without `input`; `size` at most
    /// ``writeLimit``) into `file`, just made by ``createExclusive(_:mode:)``, sets its dates to
    /// `modificationTime` (and access now) when given, and closes it, in one round trip
    /// (``writeAndClose(_:count:times:describe:fill:)``). Returns its attributes read just before
    /// its close when `describe`. The caller removes the file after a failure.
    /// - Throws: `localIOFailure` when `input` became shorter; the error of the first SFTP
    ///   status that is not OK (a full disk is a plain failure); `serverUnreachable` when the
    ///   connection breaks or a reply is malformed.
    func write(_ input: LocalFile?, size: Int64, to file: ChannelFile, modificationTime: Int64?, describe: Bool)
        throws(FileProviderError) -> RemoteAttributes?
    {
        precondition(size <= Int64(writeLimit))
        let times = modificationTime.map { ($0, Int64(Date().timeIntervalSince1970.rounded(.down))) }
        return try writeAndClose(file, count: Int(size), times: times, describe: describe) { part throws(FileProviderError) in
            guard let input, try input.read(into: part, at: 0) == part.count else {
                throw FileProviderError(
                    .localIOFailure, "\(input?.path ?? "") became shorter while it was uploaded; it is sent again later")
            }
        }
    }

    /// Creates a new file for writing with permissions `mode` (SSH_FXF_WRITE, CREAT, TRUNC and
    /// EXCL): fails when something is at `path`.
    ///
    /// - Throws: the error of the SFTP status the server answered with, naming `path`
    ///   (`filenameCollision` when something is there); `serverUnreachable` when the connection
    ///   breaks or a reply is malformed.
    func createExclusive(_ path: String, mode: UInt32 = 0o644) throws(FileProviderError) -> ChannelFile {
        var packets = PacketWriter()
        // SSH_FXP_OPEN: the path, WRITE | CREAT | TRUNC | EXCL, the permissions attribute.
        let id = packets.append(
            SFTPChannel.Packet.open, id: channel.takeID(), [Array(path.utf8)],
            trailing: PacketWriter.u32(0x3a) + PacketWriter.u32(0x4) + PacketWriter.u32(mode & 0o7777))
        try channel.send(packets.bytes, on: connection)
        var reply = try channel.replies(to: [id], on: connection)[0]
        return ChannelFile(handle: try reply.string(expecting: SFTPChannel.Packet.handle, "create", path).get(), path: path)
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
        fill: (UnsafeMutableRawBufferPointer) throws(FileProviderError) -> Void
    ) throws(FileProviderError) -> RemoteAttributes? {
        typealias Packet = SFTPChannel.Packet
        var packets = PacketWriter()
        var ids: [UInt32] = []
        if count > 0 {
            ids.append(
                packets.append(
                    Packet.write, id: channel.takeID(), [file.handle],
                    trailing: PacketWriter.u64(0) + PacketWriter.u32(UInt32(count)), dataLength: count))
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
                channel.closeWithoutWaiting(file.handle, on: connection)
                throw failure
            }
        }
        var rest = PacketWriter()
        if let times {
            // ATTRS with SSH_FILEXFER_ATTR_ACMODTIME: the access, then the modification time.
            ids.append(
                rest.append(
                    Packet.setFileStatus, id: channel.takeID(), [file.handle],
                    trailing: PacketWriter.u32(0x8) + PacketWriter.u32(UInt32(truncatingIfNeeded: times.access))
                        + PacketWriter.u32(UInt32(truncatingIfNeeded: times.modification))))
        }
        let statusID = describe ? rest.append(Packet.fileStatus, id: channel.takeID(), [file.handle]) : nil
        if let statusID { ids.append(statusID) }
        let closeID = rest.append(Packet.close, id: channel.takeID(), [file.handle])
        ids.append(closeID)
        bytes += rest.bytes
        try channel.send(bytes, on: connection)
        var attributes: RemoteAttributes?
        var failure: FileProviderError?
        for (id, var reply) in zip(ids, try channel.replies(to: ids, on: connection)) {
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
}
