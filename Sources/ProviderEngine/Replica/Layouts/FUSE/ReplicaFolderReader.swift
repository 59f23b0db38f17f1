import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// One open folder's listing through the mount (`opendir` to `releasedir`): it goes on where
/// the kernel's last request for this open ended, so a folder of any size is read once per
/// listing, one entry at a time, whatever number of requests the kernel splits it into.
///
/// Its entries come from one place for the whole listing: the backing folder (a directory
/// stream, names in the file system's order, types from the stream: ``peek()``) or, for a
/// folder the database calls dataless, the database (the items directly inside it, in path
/// order, a page of ``pageSize`` entries at a time with only the columns a listing shows,
/// ``FolderEntryPage``, filled again in place: ``peekStored()``). Cookies are positions: the
/// entry after `cookie` is the listing's `cookie + 1`-th. A request for another position than the next (a program's
/// `seekdir`, or two requests racing) starts the listing again and skips to it.
///
/// Calls are serialized by the caller (``ReplicaFileSystem`` holds ``lock`` while listing).
final class ReplicaFolderReader: @unchecked Sendable {
    /// One entry of the backing folder: its name and kind.
    struct Entry {
        var name: [UInt8]
        /// `DT_DIR`, `DT_REG`, `DT_LNK`, … (`DT_UNKNOWN` where the file system does not say).
        var type: Int32
    }

    /// Entries read from the database at once.
    static let pageSize = 512

    /// The folder's inode and path relative to the backing folder.
    let folder: UInt64
    let path: [UInt8]
    /// Whether the entries come from the database.
    let fromDatabase: Bool
    /// Held while listing.
    let lock = NSLock()

    private let store: MetadataStore
    private let domainID: Int64
    private let backing: [UInt8]
    /// The backing folder's stream, once opened.
    private var directory: OpaquePointer?
    /// The database page being read, and the name of its last entry (where the next page
    /// starts).
    private(set) var page = FolderEntryPage()
    private var pageIndex = 0
    private var lastName: [UInt8]?
    private var pagesEnded = false
    /// The entry at ``position``, read but not yet taken (from the backing folder, or from
    /// the database: ``page``'s entry at `pageIndex`).
    private var current: Entry?
    private var currentStored: FolderEntryPage.Entry?
    /// How many entries were taken since the start.
    private(set) var position: UInt64 = 0
    /// The digest of the names and kinds taken so far (FNV-1a), when the listing was read
    /// from its start without a jump: at the end, what ``digest`` gives.
    private var running: UInt64 = 0xcbf2_9ce4_8422_2325
    private var sequential = true
    private var ended = false

    init(folder: UInt64, path: [UInt8], fromDatabase: Bool, store: MetadataStore, domainID: Int64, backing: [UInt8]) {
        self.folder = folder
        self.path = path
        self.fromDatabase = fromDatabase
        self.store = store
        self.domainID = domainID
        self.backing = backing
    }

    deinit { if let directory { closedir(directory) } }

    /// The digest of the whole listing (its names and kinds, in order), once it was read to its
    /// end from its start without a jump; nil before.
    var digest: UInt64? { ended && sequential ? running : nil }

    /// The digest of `entries` as ``digest`` makes it.
    static func digest(_ entries: some Sequence<(name: [UInt8], type: Int32)>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for entry in entries { mix(&hash, entry.name, entry.type) }
        return hash
    }

    private static func mix(_ hash: inout UInt64, _ name: some Sequence<UInt8>, _ type: Int32) {
        // The name, then 0, the type's low byte and 0xff (no array made per entry).
        for byte in name { mix(&hash, byte) }
        mix(&hash, 0)
        mix(&hash, UInt8(truncatingIfNeeded: type))
        mix(&hash, 0xff)
    }

    private static func mix(_ hash: inout UInt64, _ byte: UInt8) {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01b3
    }

    /// Moves to `cookie` (the number of entries already taken): nothing when the listing is
    /// there, else from the start again, skipping.
    /// - Throws: `ioError` when the folder cannot be read again.
    func seek(to cookie: UInt64) throws(FUSEError) {
        guard cookie != position else { return }
        try rewind()
        if cookie > 0 { sequential = false }
        if fromDatabase {
            while position < cookie, try peekStored() != nil { take() }
        } else {
            while position < cookie, try peek() != nil { take() }
        }
    }

    /// The entry at ``position`` of a listing of the backing folder, or nil at the end.
    /// - Throws: `ioError` when the folder cannot be read.
    func peek() throws(FUSEError) -> Entry? {
        precondition(!fromDatabase, "ReplicaFolderReader.peek() of a listing from the database")
        if let current { return current }
        current = try nextOnDisk()
        if current == nil { ended = true }
        return current
    }

    /// The entry at ``position`` of a listing from the database (its name in ``page``), or
    /// nil at the end.
    /// - Throws: `ioError` when the database cannot be read.
    func peekStored() throws(FUSEError) -> FolderEntryPage.Entry? {
        precondition(fromDatabase, "ReplicaFolderReader.peekStored() of a listing of the backing folder")
        if let currentStored { return currentStored }
        currentStored = try nextStored()
        if currentStored == nil { ended = true }
        return currentStored
    }

    /// Takes the entry ``peek()`` or ``peekStored()`` gave.
    func take() {
        if let entry = currentStored {
            page.withName(of: entry) { Self.mix(&running, $0, Self.type(of: entry.kind)) }
            currentStored = nil
        } else if let entry = current {
            Self.mix(&running, entry.name, entry.type)
            current = nil
        } else {
            return
        }
        position += 1
    }

    private func rewind() throws(FUSEError) {
        position = 0
        current = nil
        currentStored = nil
        running = 0xcbf2_9ce4_8422_2325
        ended = false
        page = FolderEntryPage()
        pageIndex = 0
        lastName = nil
        pagesEnded = false
        if let directory { rewinddir(directory) }
    }

    /// `lstat` of the entry `name` of a listing of the backing folder (through the stream's
    /// descriptor: no path walk); nil when it is gone or the listing is the database's.
    func status(of name: [UInt8]) -> stat? {
        guard let directory else { return nil }
        var status = stat()
        let result = (name + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { fstatat(dirfd(directory), $0.baseAddress!, &status, AT_SYMLINK_NOFOLLOW) }
        }
        return result == 0 ? status : nil
    }

    private func nextOnDisk() throws(FUSEError) -> Entry? {
        if directory == nil {
            let full = path.isEmpty ? backing : backing + [UInt8(ascii: "/")] + path
            let fd = (full + [0]).withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            }
            guard fd >= 0 else { throw .lastCall() }
            guard let stream = fdopendir(fd) else {
                close(fd)
                throw .lastCall()
            }
            directory = stream
        }
        guard let directory else { return nil }
        while let entry = readdir(directory) {
            let name = DirectoryEntry.nameBytes(of: entry)
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            return Entry(name: name, type: DirectoryEntry.type(of: entry))
        }
        return nil
    }

    private func nextStored() throws(FUSEError) -> FolderEntryPage.Entry? {
        while pageIndex >= page.entries.count {
            if pagesEnded { return nil }
            do {
                try store.folderEntries(domainID: domainID, inFolderAt: path, after: lastName, limit: Self.pageSize, into: &page)
            } catch {
                throw .ioError
            }
            pageIndex = 0
            if page.isLast { pagesEnded = true }
            if let last = page.entries.last { lastName = page.name(of: last) }
        }
        let entry = page.entries[pageIndex]
        pageIndex += 1
        return entry
    }

    /// `DT_DIR`, `DT_REG` and `DT_LNK` of <dirent.h>.
    static let folderType: Int32 = 4
    static let fileType: Int32 = 8
    static let linkType: Int32 = 10

    /// The directory entry type of an item of `kind`.
    static func type(of kind: ItemKind) -> Int32 {
        switch kind {
        case .folder: return folderType
        case .symlink: return linkType
        case .file: return fileType
        }
    }

    /// The file type bits (`S_IFDIR`, ...) of a directory entry type; 0 when unknown.
    static func modeBits(ofType type: Int32) -> UInt32 {
        switch type {
        case folderType: return UInt32(S_IFDIR)
        case fileType: return UInt32(S_IFREG)
        case linkType: return UInt32(S_IFLNK)
        case 1: return UInt32(S_IFIFO)
        case 2: return UInt32(S_IFCHR)
        case 6: return UInt32(S_IFBLK)
        case 12: return UInt32(S_IFSOCK)
        default: return 0
        }
    }
}
