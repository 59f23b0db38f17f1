#if canImport(Glibc)
    import Glibc
#endif

/// What `df` and `statvfs` show of the mount.
public struct FUSEVolumeStatistics: Sendable, Hashable {
    /// The unit of the block counts.
    public var blockSize: UInt64
    /// Blocks in all, free, and free for an ordinary user.
    public var blocks: UInt64
    public var freeBlocks: UInt64
    public var availableBlocks: UInt64
    /// Items in all and free (0 when there is no limit).
    public var files: UInt64
    public var freeFiles: UInt64
    /// The longest name, in bytes.
    public var maximumNameLength: UInt64

    public init(
        blockSize: UInt64, blocks: UInt64, freeBlocks: UInt64, availableBlocks: UInt64, files: UInt64 = 0,
        freeFiles: UInt64 = 0, maximumNameLength: UInt64 = 255
    ) {
        self.blockSize = blockSize
        self.blocks = blocks
        self.freeBlocks = freeBlocks
        self.availableBlocks = availableBlocks
        self.files = files
        self.freeFiles = freeFiles
        self.maximumNameLength = maximumNameLength
    }

    /// The statistics of the file system holding the backing folder (`statvfs` of it).
    public init(_ statistics: statvfs) {
        self.init(
            blockSize: UInt64(statistics.f_frsize), blocks: UInt64(statistics.f_blocks), freeBlocks: UInt64(statistics.f_bfree),
            availableBlocks: UInt64(statistics.f_bavail), files: UInt64(statistics.f_files),
            freeFiles: UInt64(statistics.f_ffree), maximumNameLength: UInt64(statistics.f_namemax))
    }

    var statvfs: statvfs {
        var result = Glibc.statvfs()
        result.f_bsize = UInt(blockSize)
        result.f_frsize = UInt(blockSize)
        result.f_blocks = UInt(blocks)
        result.f_bfree = UInt(freeBlocks)
        result.f_bavail = UInt(availableBlocks)
        result.f_files = UInt(files)
        result.f_ffree = UInt(freeFiles)
        result.f_favail = UInt(freeFiles)
        result.f_namemax = UInt(maximumNameLength)
        return result
    }
}
