import CLibSSH2
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// An open remote file or folder, closed in `deinit` (or earlier with ``close()``).
final class SFTPFile {
    private var handle: OpaquePointer?
    private let connection: SFTPConnection
    let path: String

    init(handle: OpaquePointer, connection: SFTPConnection, path: String) {
        self.handle = handle
        self.connection = connection
        self.path = path
    }

    deinit {
        if let handle, !connection.isDead { libssh2_sftp_close_handle(handle) }
    }

    /// Closes the handle, reporting errors (a server may report a failed write only here).
    func close() throws(FileProviderError) {
        guard let handle else { return }
        self.handle = nil
        connection.count()
        if libssh2_sftp_close_handle(handle) != 0 { throw connection.failure("close", path: path) }
    }

    /// The attributes of the open file.
    func attributes() throws(FileProviderError) -> RemoteAttributes {
        connection.count()
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        if libssh2_sftp_fstat_ex(handle, &attributes, 0) != 0 { throw connection.failure("stat", path: path) }
        return RemoteAttributes(attributes)
    }

    /// Sets the access and modification times of the open file.
    func setTimes(modification: Int64, access: Int64) throws(FileProviderError) {
        connection.count()
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        attributes.flags = UInt(LIBSSH2_SFTP_ATTR_ACMODTIME)
        attributes.mtime = UInt(truncatingIfNeeded: modification)
        attributes.atime = UInt(truncatingIfNeeded: access)
        if libssh2_sftp_fstat_ex(handle, &attributes, 1) != 0 { throw connection.failure("set the dates of", path: path) }
    }

    /// Moves the read position.
    func seek(to offset: Int64) { libssh2_sftp_seek64(handle, UInt64(offset)) }

    /// Reads up to `buffer.count` bytes; 0 at the end of the file. libssh2 keeps several read
    /// requests in flight for a large buffer.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(FileProviderError) -> Int {
        connection.count()
        let count = libssh2_sftp_read(handle, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), buffer.count)
        if count < 0 { throw connection.failure("read", path: path) }
        return count
    }

    /// Writes `count` bytes at `offset`, which `fill` copies into the part of `buffer` it is
    /// given (all of it, from the file offset it is given), keeping requests in flight all along.
    ///
    /// libssh2 returns from a write once the server acknowledged part of it, and the bytes not
    /// acknowledged yet must start the next call's buffer (it sends only what is new). So the
    /// buffer slides: acknowledged bytes are dropped, new ones appended, and the requests in
    /// flight never drain before the end. (Whole 2 MiB writes, each waiting for its last
    /// acknowledgment, left the server idle while we encrypted the next one and us idle while
    /// it caught up.)
    func write(
        count: Int64, at offset: Int64, through buffer: UnsafeMutableRawBufferPointer,
        fill: (UnsafeMutableRawBufferPointer, Int64) throws(FileProviderError) -> Void
    ) throws(FileProviderError) {
        seek(to: offset)
        let base = buffer.baseAddress!
        var unacknowledged = 0  // buffer[unacknowledged..<filled] is not acknowledged yet
        var filled = 0
        var copied: Int64 = 0
        var acknowledged: Int64 = 0
        while acknowledged < count {
            if unacknowledged >= buffer.count / 2 {
                memmove(base, base + unacknowledged, filled - unacknowledged)
                filled -= unacknowledged
                unacknowledged = 0
            }
            if filled < buffer.count && copied < count {
                let more = Int(min(Int64(buffer.count - filled), count - copied))
                try fill(UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<(filled + more)]), offset + copied)
                filled += more
                copied += Int64(more)
            }
            connection.count()
            let sent = libssh2_sftp_write(
                handle, (base + unacknowledged).assumingMemoryBound(to: CChar.self), filled - unacknowledged)
            if sent < 0 { throw connection.failure("write", path: path) }
            unacknowledged += sent
            acknowledged += Int64(sent)
        }
    }

    /// The next entry of a folder as raw name bytes and attributes; `nil` at the end.
    func nextEntry() throws(FileProviderError) -> (name: [UInt8], attributes: RemoteAttributes)? {
        connection.count()
        var buffer = [CChar](repeating: 0, count: 4096)
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        let length = libssh2_sftp_readdir_ex(handle, &buffer, buffer.count, nil, 0, &attributes)
        if length < 0 { throw connection.failure("list", path: path) }
        if length == 0 { return nil }
        return (buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, RemoteAttributes(attributes))
    }
}
