/// The process a FUSE request comes from, as the kernel says: every ``FUSEFileSystem`` method
/// gets it (access rules by program, issue #42, apply before anything is fetched).
///
/// For writes the kernel makes from its page cache (the writeback cache) the requester is not
/// the program that wrote: ``processIdentifier`` is 0 then.
public struct FUSERequester: Sendable, Hashable {
    /// The requesting thread's process (0 for the kernel's own requests).
    public var processIdentifier: Int32
    /// Its user and group (file system ids).
    public var userIdentifier: UInt32
    public var groupIdentifier: UInt32
    /// Its umask (applies to the modes of ``FUSEFileSystem/create(_:in:mode:flags:by:)`` and
    /// ``FUSEFileSystem/makeFolder(_:in:mode:by:)``, which get the mode the program asked for).
    public var umask: UInt32

    public init(processIdentifier: Int32, userIdentifier: UInt32, groupIdentifier: UInt32, umask: UInt32 = 0) {
        self.processIdentifier = processIdentifier
        self.userIdentifier = userIdentifier
        self.groupIdentifier = groupIdentifier
        self.umask = umask
    }
}
