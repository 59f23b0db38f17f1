/// A folder a program opened through the mount (`opendir`), as
/// ``FUSEFileSystem/openFolder(_:by:)`` answers it.
public struct FUSEOpenFolder: Sendable, Hashable {
    /// What the file system keeps for this open (a listing under way, say), given back to
    /// ``FUSEFileSystem/list(_:handle:after:into:by:)`` and ``FUSEFileSystem/releaseFolder(_:handle:)``;
    /// 0 for nothing. Below 2^63.
    public var handle: UInt64
    /// Whether the kernel may keep the folder's listing and answer later listings from it
    /// without asking (`FOPEN_CACHE_DIR` with `FOPEN_KEEP_CACHE`): until the folder changes
    /// through the mount (the kernel drops it then) or the file system invalidates the folder
    /// (``FUSESession/invalidate(inode:)``, which a change made behind the mount needs).
    public var keepsListing: Bool

    public init(handle: UInt64, keepsListing: Bool) {
        self.handle = handle
        self.keepsListing = keepsListing
    }
}
