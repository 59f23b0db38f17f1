/// What a program changes of an item's attributes (`truncate`, `chmod`, `chown`, `touch`,
/// `utimensat`): ``FUSEFileSystem/setAttributes(_:of:descriptor:by:)`` gets the fields that are
/// set; nil fields stay as they are.
public struct FUSEAttributeChanges: Sendable, Hashable {
    /// A time a program sets.
    public enum Time: Sendable, Hashable {
        /// The time now (`UTIME_NOW`, `touch`).
        case now
        /// This time.
        case at(FUSETimestamp)
    }

    /// A new size (`truncate`, `ftruncate`, an open with `O_TRUNC` where the kernel does not pass
    /// it to ``FUSEFileSystem/open(_:flags:by:)``): bytes past it go, bytes added read as zeros.
    public var size: UInt64?
    /// New permission bits (`chmod`; the type bits are the item's).
    public var mode: UInt32?
    public var owner: UInt32?
    public var group: UInt32?
    public var accessTime: Time?
    public var modificationTime: Time?

    public init(
        size: UInt64? = nil, mode: UInt32? = nil, owner: UInt32? = nil, group: UInt32? = nil, accessTime: Time? = nil,
        modificationTime: Time? = nil
    ) {
        self.size = size
        self.mode = mode
        self.owner = owner
        self.group = group
        self.accessTime = accessTime
        self.modificationTime = modificationTime
    }
}
