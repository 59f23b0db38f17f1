import CLibSSH2
import Foundation
import ProviderCore

/// The attributes of a remote file, as SFTP version 3 gives them (whole seconds, no inode).
struct RemoteAttributes: Sendable, Hashable {
    var size: Int64
    var permissions: UInt32
    var uid: UInt32
    var gid: UInt32
    /// Modification time in seconds since 1970.
    var modificationTime: Int64
    var accessTime: Int64
    /// A size the server sent that no file can have (over ``ItemBounds/maximumSize``, such as
    /// 2^64−1), or `nil`; ``size`` is 0 then.
    var sizeProblem: String?
    /// A modification time the server sent outside ``ItemBounds``, or `nil`;
    /// ``modificationTime`` is 0 then.
    var dateProblem: String?

    /// Why these attributes cannot describe an item of `kind`, or `nil` (a folder's size is not
    /// looked at). Such attributes never become an item.
    func problem(for kind: ItemKind) -> String? {
        kind == .folder ? dateProblem : sizeProblem ?? dateProblem
    }

    init(
        size: Int64 = 0, permissions: UInt32 = 0, uid: UInt32 = 0, gid: UInt32 = 0, modificationTime: Int64 = 0,
        accessTime: Int64 = 0
    ) {
        self.size = size
        self.permissions = permissions
        self.uid = uid
        self.gid = gid
        self.modificationTime = modificationTime
        self.accessTime = accessTime
    }

    init(_ raw: LIBSSH2_SFTP_ATTRIBUTES) {
        let flags = raw.flags
        let hasOwner = flags & UInt(LIBSSH2_SFTP_ATTR_UIDGID) != 0
        self.init(
            permissions: flags & UInt(LIBSSH2_SFTP_ATTR_PERMISSIONS) != 0 ? UInt32(truncatingIfNeeded: raw.permissions) : 0,
            uid: hasOwner ? UInt32(truncatingIfNeeded: raw.uid) : 0, gid: hasOwner ? UInt32(truncatingIfNeeded: raw.gid) : 0)
        if flags & UInt(LIBSSH2_SFTP_ATTR_SIZE) != 0 { setSize(UInt64(raw.filesize)) }
        if flags & UInt(LIBSSH2_SFTP_ATTR_ACMODTIME) != 0 {
            setTimes(modification: UInt64(raw.mtime), access: UInt64(raw.atime))
        }
    }

    /// Takes a size from the wire (an unsigned 64-bit number): one over
    /// ``ItemBounds/maximumSize`` is kept out of ``size`` (which stays 0) and noted in
    /// ``sizeProblem``.
    mutating func setSize(_ wire: UInt64) {
        if let problem = ItemBounds.problem(withSize: wire) {
            sizeProblem = problem
            size = 0
        } else {
            size = Int64(wire)
        }
    }

    /// Takes the times from the wire (seconds since 1970; 32 bits in SFTP version 3, wider
    /// through libssh2's structure): a modification time outside ``ItemBounds`` is noted in
    /// ``dateProblem``; an access time that does not fit is kept as 0 (it is never shown).
    mutating func setTimes(modification: UInt64, access: UInt64) {
        if let problem = ItemBounds.problem(withSeconds: modification, "modification date") {
            dateProblem = problem
            modificationTime = 0
        } else {
            modificationTime = Int64(modification)
        }
        accessTime = Int64(exactly: access) ?? 0
    }

    /// The kind of item, or `nil` for sockets, FIFOs and devices.
    var kind: ItemKind? {
        switch permissions & UInt32(LIBSSH2_SFTP_S_IFMT) {
        case UInt32(LIBSSH2_SFTP_S_IFREG): return .file
        case UInt32(LIBSSH2_SFTP_S_IFDIR): return .folder
        case UInt32(LIBSSH2_SFTP_S_IFLNK): return .symlink
        default: return nil
        }
    }
}
