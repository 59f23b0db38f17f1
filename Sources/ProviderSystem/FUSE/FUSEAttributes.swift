#if canImport(Glibc)
    import Glibc
#endif

/// What `stat` shows of an item through the mount, with the inode the kernel knows it by.
///
/// Inodes are the file system's: stable for the item's life (the database's row id, say), 1 for
/// the root folder, never 0. The kernel counts the lookups it holds of each (a successful
/// ``FUSEFileSystem/lookup(_:in:by:)``, ``FUSEFileSystem/create(_:in:mode:flags:by:)``,
/// ``FUSEFileSystem/makeFolder(_:in:mode:by:)``, ``FUSEFileSystem/makeSymbolicLink(_:in:target:by:)``
/// and every entry of a listing with attributes, ``FUSEListingSink/countsLookups``) and gives
/// them back with ``FUSEFileSystem/forget(_:lookups:)``.
public struct FUSEAttributes: Sendable, Hashable {
    /// The inode the kernel knows the item by (1 for the root folder).
    public var inode: UInt64
    /// The file type bits and permission bits, as `st_mode` (`S_IFREG | 0o644`).
    public var mode: UInt32
    /// Size in bytes (what a read up to the end gets).
    public var size: UInt64
    /// Hard links (1 for files; folders may say 1 too, which tells `find` not to count).
    public var linkCount: UInt32
    /// Owner and group.
    public var owner: UInt32
    public var group: UInt32
    public var accessTime: FUSETimestamp
    public var modificationTime: FUSETimestamp
    public var changeTime: FUSETimestamp
    /// Bytes of disk the item holds locally (`du`, `st_blocks`); the size when nil.
    public var allocatedSize: UInt64?
    /// Tells apart items that reuse an inode number (0 while numbers are never reused).
    public var generation: UInt64

    public init(
        inode: UInt64, mode: UInt32, size: UInt64, linkCount: UInt32 = 1, owner: UInt32, group: UInt32,
        modificationTime: FUSETimestamp, accessTime: FUSETimestamp? = nil, changeTime: FUSETimestamp? = nil,
        allocatedSize: UInt64? = nil, generation: UInt64 = 0
    ) {
        self.inode = inode
        self.mode = mode
        self.size = size
        self.linkCount = linkCount
        self.owner = owner
        self.group = group
        self.modificationTime = modificationTime
        self.accessTime = accessTime ?? modificationTime
        self.changeTime = changeTime ?? modificationTime
        self.allocatedSize = allocatedSize
        self.generation = generation
    }

    /// The attributes `stat` found for a file of the backing folder, under the inode `inode`.
    public init(inode: UInt64, stat: stat) {
        self.init(
            inode: inode, mode: stat.st_mode, size: UInt64(max(stat.st_size, 0)), linkCount: UInt32(stat.st_nlink),
            owner: stat.st_uid, group: stat.st_gid, modificationTime: FUSETimestamp(stat.st_mtim),
            accessTime: FUSETimestamp(stat.st_atim), changeTime: FUSETimestamp(stat.st_ctim),
            allocatedSize: UInt64(max(stat.st_blocks, 0)) * 512)
    }

    /// Whether the item is a folder.
    public var isFolder: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFDIR) }

    /// The attributes as the kernel takes them.
    var stat: stat {
        var result = Glibc.stat()
        result.st_ino = UInt(inode)
        result.st_mode = mode
        result.st_nlink = UInt(linkCount)
        result.st_uid = owner
        result.st_gid = group
        result.st_size = Int(clamping: size)
        result.st_blksize = 4096
        result.st_blocks = Int(clamping: ((allocatedSize ?? size) + 511) / 512)
        result.st_atim = accessTime.timespec
        result.st_mtim = modificationTime.timespec
        result.st_ctim = changeTime.timespec
        return result
    }
}
