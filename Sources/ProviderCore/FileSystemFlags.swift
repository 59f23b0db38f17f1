/// What the file system shows of an item's permissions, as in Apple's
/// `NSFileProviderFileSystemFlags` (the same names and bits).
///
/// The engine keeps ``userExecutable`` on the replica file of a file item: a downloaded or
/// dataless file of an executable item gets the x bit wherever it has the r bit (`0644`
/// becomes `0755`), across eviction and re-download. The other flags are kept in the database
/// and passed on; the replica does not act on them yet. A store that has no such notion leaves
/// the default, ``plainFile``.
public struct FileSystemFlags: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The owner may execute the file (POSIX `S_IXUSR`, `st_mode & 0100`).
    public static let userExecutable = FileSystemFlags(rawValue: 1 << 0)
    /// The owner may read the item.
    public static let userReadable = FileSystemFlags(rawValue: 1 << 1)
    /// The owner may write the item.
    public static let userWritable = FileSystemFlags(rawValue: 1 << 2)
    /// The item is hidden from ordinary listings.
    public static let hidden = FileSystemFlags(rawValue: 1 << 3)
    /// The item's name is shown without its extension.
    public static let pathExtensionHidden = FileSystemFlags(rawValue: 1 << 4)

    /// What every item has unless its store says otherwise: readable and writable, not
    /// executable, not hidden.
    public static let plainFile: FileSystemFlags = [.userReadable, .userWritable]

    /// The flags of a POSIX mode (`st_mode`, or an SFTP permissions attribute): the owner's
    /// r, w and x bits. Hidden is a matter of names on POSIX stores and is not read here.
    public init(posixMode mode: UInt32) {
        var flags: FileSystemFlags = []
        if mode & 0o100 != 0 { flags.insert(.userExecutable) }
        if mode & 0o400 != 0 { flags.insert(.userReadable) }
        if mode & 0o200 != 0 { flags.insert(.userWritable) }
        self = flags
    }

    /// `mode` (permission bits) with the x bits this item's ``userExecutable`` asks for: with
    /// it, x wherever r is set (`0644` gives `0755`, `0600` gives `0700`); without it, no x
    /// bit. The bits above the permissions are kept.
    public func applied(toMode mode: UInt32) -> UInt32 {
        let withoutExecute = mode & ~UInt32(0o111)
        guard contains(.userExecutable) else { return withoutExecute }
        return withoutExecute | ((mode & 0o444) >> 2)
    }
}
