import CFUSE

#if canImport(Glibc)
    import Glibc
#endif

/// Where ``FUSEFileSystem/list(_:after:into:by:)`` puts a folder's entries: the kernel's buffer
/// for one `readdir` request, which holds a few dozen to a few hundred entries. The listing
/// stops adding when ``add(_:_:cookie:)`` says the buffer is full; the kernel asks again from
/// the cookie of the last entry it got, so a folder of any size lists with bounded memory.
///
/// The session lists `.` and `..` itself: a file system adds only its items.
public struct FUSEListingSink: ~Copyable {
    private let request: fuse_req_t?
    private let buffer: UnsafeMutablePointer<CChar>
    private let capacity: Int
    private(set) var used = 0
    /// The cookie of the next entry is offset by this (the session's cookies 1 and 2 are `.`
    /// and `..`).
    private let cookieBase: UInt64
    private let entryTimeout: Double
    private let attributeTimeout: Double

    /// Whether entries go with their attributes (readdirplus): each entry the buffer takes then
    /// counts as one lookup of its inode, which the kernel gives back with
    /// ``FUSEFileSystem/forget(_:lookups:)``. Without, entries count nothing.
    public let countsLookups: Bool

    init(
        request: fuse_req_t?, buffer: UnsafeMutablePointer<CChar>, capacity: Int, withAttributes: Bool, cookieBase: UInt64,
        entryTimeout: Double, attributeTimeout: Double
    ) {
        self.request = request
        self.buffer = buffer
        self.capacity = capacity
        countsLookups = withAttributes
        self.cookieBase = cookieBase
        self.entryTimeout = entryTimeout
        self.attributeTimeout = attributeTimeout
    }

    /// Adds the entry `name` with `attributes`; `cookie` (nonzero, below 2^63 - 2) is what the
    /// listing is asked to go on after when it stops here. Returns false, adding nothing, when
    /// the buffer is full: stop and return then.
    public mutating func add(_ name: FUSEName, _ attributes: FUSEAttributes, cookie: UInt64) -> Bool {
        name.withCString { addEntry($0, attributes, cookie: cookie + cookieBase) }
    }

    /// ``add(_:_:cookie:)`` of a name given as a NUL-terminated C string (1 to 255 bytes, no
    /// `/`), as a listing read into a buffer of names has it: no copy of the name.
    public mutating func add(cName name: UnsafePointer<CChar>, _ attributes: FUSEAttributes, cookie: UInt64) -> Bool {
        addEntry(name, attributes, cookie: cookie + cookieBase)
    }

    /// Adds `.` or `..` (which never count as lookups).
    mutating func addDot(_ name: String, folder: UInt64, cookie: UInt64) -> Bool {
        let attributes = FUSEAttributes(
            inode: folder, mode: UInt32(S_IFDIR), size: 0, owner: 0, group: 0, modificationTime: FUSETimestamp(seconds: 0))
        let request = self.request
        return name.withCString { pointer in
            if countsLookups {
                // An entry with inode 0 tells the kernel to take no lookup (it skips `.` and
                // `..` anyway); the name still lists.
                var entry = fuse_entry_param()
                entry.attr = attributes.stat
                entry.attr.st_ino = UInt(folder)
                return append { fp_fuse_add_direntry_plus(request, $0, $1, pointer, &entry, off_t(cookie)) }
            }
            return addEntry(pointer, attributes, cookie: cookie)
        }
    }

    private mutating func addEntry(_ name: UnsafePointer<CChar>, _ attributes: FUSEAttributes, cookie: UInt64) -> Bool {
        let request = self.request
        var status = attributes.stat
        if countsLookups {
            var entry = fuse_entry_param()
            entry.ino = fuse_ino_t(attributes.inode)
            entry.generation = attributes.generation
            entry.attr = status
            entry.attr_timeout = attributeTimeout
            entry.entry_timeout = entryTimeout
            return append { fp_fuse_add_direntry_plus(request, $0, $1, name, &entry, off_t(cookie)) }
        }
        return append { fp_fuse_add_direntry(request, $0, $1, name, &status, off_t(cookie)) }
    }

    /// Runs `add` on the free part of the buffer; keeps the entry when it fitted.
    private mutating func append(_ add: (UnsafeMutablePointer<CChar>, Int) -> Int) -> Bool {
        let free = capacity - used
        let needed = add(buffer + used, free)
        guard needed <= free else { return false }
        used += needed
        return true
    }
}
