/// A file a program opened through the mount, as ``FUSEFileSystem/open(_:flags:by:)`` and
/// ``FUSEFileSystem/create(_:in:mode:flags:by:)`` answer it.
public struct FUSEOpenFile: Sendable, Hashable {
    /// A descriptor of the backing file, open as the program asked (read, write or both). Reads
    /// are answered from it (spliced by the kernel, no copy through this process); every later
    /// request about this open gets it back. The session closes it after
    /// ``FUSEFileSystem/release(_:descriptor:flags:)``.
    public var descriptor: Int32
    /// Whether every byte of the file is present in the backing file: the kernel then keeps what
    /// it cached of the file from an earlier open (`FOPEN_KEEP_CACHE`), so a second `cat` reads
    /// from the page cache. False drops the cache at this open (a file being filled, or changed
    /// by a sync since).
    public var isComplete: Bool

    public init(descriptor: Int32, isComplete: Bool) {
        self.descriptor = descriptor
        self.isComplete = isComplete
    }
}
