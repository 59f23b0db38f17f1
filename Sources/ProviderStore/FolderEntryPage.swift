import ProviderCore

/// A page of the items directly inside a folder, with only what a listing of names and
/// attributes shows (``MetadataStore/folderEntries(domainID:inFolderAt:after:limit:into:)``):
/// the FUSE layout's listings of dataless folders, 100,000 entries for a `find` of a domain of
/// that size. Its names are kept in one buffer and the page is filled again in place, so a
/// listing allocates nothing per entry.
public struct FolderEntryPage: Sendable {
    /// One item: its name (where it lies in ``names``) and the columns a listing needs.
    public struct Entry: Sendable {
        /// Where the name's bytes start in ``FolderEntryPage/names``; a NUL follows them.
        public var nameStart: Int
        /// The name's length in bytes: 1 to 255, no NUL and no `/` (checked when read).
        public var nameCount: Int
        public var kind: ItemKind
        /// The size in bytes (never negative).
        public var size: Int64
        /// The modification date (the creation date when the row has none; 0 when neither), in
        /// seconds since 1970, finite.
        public var modificationSeconds: Double
        /// ``ItemRecord/fileSystemFlags``.
        public var fileSystemFlags: Int
        /// The length in bytes of a symbolic link's target (0 for other kinds or none).
        public var symlinkTargetLength: Int
        /// ``ItemRecord/isDataless``.
        public var isDataless: Bool
    }

    /// The entries, in path order.
    public internal(set) var entries: [Entry] = []
    /// The names' bytes, each followed by a NUL (the C string the kernel's listing takes).
    public internal(set) var names: [UInt8] = []
    /// Whether the folder has no entries after this page.
    public internal(set) var isLast = false

    public init() {}

    /// Calls `body` with the name of `entry` (without its NUL; `baseAddress` points to a
    /// NUL-terminated string).
    @inlinable
    public func withName<T>(of entry: Entry, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        try names.withUnsafeBufferPointer { all in
            try body(UnsafeBufferPointer(rebasing: all[entry.nameStart..<(entry.nameStart + entry.nameCount)]))
        }
    }

    /// The name of `entry`.
    public func name(of entry: Entry) -> [UInt8] {
        Array(names[entry.nameStart..<(entry.nameStart + entry.nameCount)])
    }

    /// Empties the page, keeping its buffers.
    mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        names.removeAll(keepingCapacity: true)
        isLast = false
    }

    /// Adds an entry whose name is `name`; false, adding nothing, when the name is not one a
    /// folder can hold (empty, over 255 bytes, with NUL or `/`).
    mutating func append(name: UnsafeRawBufferPointer, _ entry: Entry) -> Bool {
        guard !name.isEmpty, name.count <= 255, !name.contains(0), !name.contains(UInt8(ascii: "/")) else { return false }
        var entry = entry
        entry.nameStart = names.count
        entry.nameCount = name.count
        names.append(contentsOf: name)
        names.append(0)
        entries.append(entry)
        return true
    }
}
