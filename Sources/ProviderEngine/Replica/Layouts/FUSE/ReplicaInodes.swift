import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The inodes a ``ReplicaFileSystem`` handed to the kernel, by name in their folder: what the
/// kernel holds and nothing more. The root is 1; every other name gets a number when the kernel
/// first looks it up and keeps it while the kernel holds a lookup of it (``forget(_:lookups:)``
/// drops it), so the table is as small as the kernel's cache of the mount, whatever the size of
/// the domain. A renamed item keeps its number while the kernel holds it.
///
/// The number is made from the item's path (``number(forPath:)``, a 64-bit FNV-1a hash of the
/// path's bytes, between 2^41 and 2^63): the same whether the item was ever written to the
/// backing folder or is known only to the database (an item of a dataless folder), so it stays
/// when the folder is populated, when the kernel forgets and looks the item up again, when the
/// engine replaces the backing file (a new version, an eviction) and across restarts of
/// `serve` (`git` keeps inode numbers in its index; a new one makes it read the file again).
/// A backing inode number would change at population, and the database's rows have no stable
/// row id (the item table has none, and a row is written again on every change). Where the
/// number is taken by another inode the kernel holds (a renamed item, a removed one the kernel
/// has not forgotten, a collision of the hash), a number from 2^40 up is used.
///
/// Each folder entry knows where its items come from (``Source``): the backing folder, or the
/// database while the folder is dataless (never written to disk). Each entry remembers what
/// the kernel was last told about it (``Seen``), so that after a sync ``held()`` shows what
/// changed behind the kernel's back. Any thread.
final class ReplicaInodes: Sendable {
    /// What the kernel was last told about an item.
    struct Seen: Equatable, Sendable {
        /// The backing file's inode number; 0 for an item answered from the database.
        var backingInode: UInt64
        var size: Int64
        var modification: timespec
        /// Type and permission bits.
        var mode: UInt32
        /// A folder's change time (entries added or removed in it change it); zero for others.
        var change: timespec

        init(_ status: stat) {
            backingInode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            modification = status.st_mtim
            mode = status.st_mode
            change = status.st_mode & S_IFMT == S_IFDIR ? status.st_ctim : timespec()
        }

        /// What the kernel is told about an item of the database (no backing file).
        init(size: Int64, modification: timespec, mode: UInt32) {
            backingInode = 0
            self.size = size
            self.modification = modification
            self.mode = mode
            change = timespec()
        }

        /// Whether the item is on disk (not answered from the database).
        var isOnDisk: Bool { backingInode != 0 }

        static func == (a: Seen, b: Seen) -> Bool {
            a.backingInode == b.backingInode && a.size == b.size && a.mode == b.mode && a.modification.tv_sec == b.modification.tv_sec
                && a.modification.tv_nsec == b.modification.tv_nsec && a.change.tv_sec == b.change.tv_sec
                && a.change.tv_nsec == b.change.tv_nsec
        }

        /// Whether the kernel's view of the item changed between `self` (told) and `now`,
        /// ignoring where the answer came from (database or backing file) and a folder's change
        /// time when one of them is the database's.
        func differs(from now: Seen) -> Bool {
            if isOnDisk && now.isOnDisk { return self != now }
            return size != now.size || mode != now.mode || modification.tv_sec != now.modification.tv_sec
                || modification.tv_nsec != now.modification.tv_nsec
        }
    }

    /// Where the items of a folder come from.
    enum Source: Sendable, Equatable {
        /// The backing folder: the folder is populated (or was made through the mount).
        case disk
        /// The database: the folder is dataless, its items were never written.
        case database
    }

    private struct Node {
        var parent: UInt64
        var name: [UInt8]
        var lookups: UInt64
        /// Removed or replaced through the mount: no path any more.
        var detached = false
        /// Raised when the backing file was replaced by the engine (a new inode there): the
        /// kernel then makes a new inode of the name and takes its size.
        var generation: UInt64 = 0
        /// A folder's source of items, once known.
        var source: Source?
        var seen: Seen?
        /// A folder listed from the database: the digest of its last complete listing
        /// (``ReplicaFolderReader/digest``), what the kernel may keep.
        var listingDigest: UInt64?
    }

    private struct Key: Hashable {
        var parent: UInt64
        var name: [UInt8]

        // The name's bytes hashed as one buffer: `Array`'s own hashing feeds the hasher one
        // byte at a time, which was a tenth of a fresh `find`'s time in `serve`.
        func hash(into hasher: inout Hasher) {
            hasher.combine(parent)
            name.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    /// Entries the table makes room for at once: a fresh `find` or `ls -lR` of a large domain
    /// puts every entry it lists in the kernel's cache, and growing the table by doubling
    /// moved every entry again at each step (at 1 << 16, the step past 65,536 was still 5% of
    /// `serve`'s time in a fresh `find` of 100,000 entries). The memory is taken only as
    /// entries come (a table this size holds 100,000 entries without growing, in the room it
    /// would have grown to).
    static let reservedEntries = 1 << 17

    private struct Table {
        var nodes: [UInt64: Node]
        var inodes: [Key: UInt64]
        /// The next number for a name whose own number cannot be used.
        var next: UInt64 = 1 << 40

        init() {
            nodes = Dictionary(minimumCapacity: ReplicaInodes.reservedEntries)
            nodes[1] = Node(parent: 1, name: [], lookups: 1, source: .disk)
            inodes = Dictionary(minimumCapacity: ReplicaInodes.reservedEntries)
        }
    }

    private let table = Mutex(Table())

    /// FNV-1a's starting value.
    static let pathHashStart: UInt64 = 0xcbf2_9ce4_8422_2325

    /// The FNV-1a hash of `bytes` continued from `hash` (``pathHashStart`` for a path's start).
    static func pathHash<Bytes: Sequence<UInt8>>(_ bytes: Bytes, from hash: UInt64 = pathHashStart) -> UInt64 {
        var hash = hash
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The number an item at `path` (relative to the backing folder) gets: FNV-1a of its bytes,
    /// between 2^41 and 2^63.
    static func number(forPath path: [UInt8]) -> UInt64 { number(forPathHash: pathHash(path)) }

    /// The number of the item whose path's FNV-1a hash (``pathHash(_:from:)``) is `hash`.
    static func number(forPathHash hash: UInt64) -> UInt64 { (1 << 41) + hash % ((1 << 63) - (1 << 41)) }

    /// The number of the item `name` in the folder whose path hashes to `folderHash` (the
    /// root's path is empty): ``number(forPath:)`` of the joined path, without joining it.
    static func number(of name: UnsafeBufferPointer<UInt8>, inFolderHashed folderHash: UInt64, root: Bool) -> UInt64 {
        number(forPathHash: pathHash(name, from: root ? folderHash : pathHash(CollectionOfOne(UInt8(ascii: "/")), from: folderHash)))
    }

    /// The path of `inode` relative to the backing folder (empty for the root), or nil when the
    /// kernel holds no such inode or it was removed.
    func path(_ inode: UInt64) -> [UInt8]? {
        table.withLock { Self.path(inode, in: $0) }
    }

    private static func path(_ inode: UInt64, in table: Table) -> [UInt8]? {
        var parts: [[UInt8]] = []
        var current = inode
        while current != 1 {
            guard let node = table.nodes[current], !node.detached else { return nil }
            parts.append(node.name)
            current = node.parent
        }
        return Array(parts.reversed().joined(separator: [UInt8(ascii: "/")]))
    }

    /// Where `inode` is: its path, its folder, and whether it is answered from the database
    /// (its folder's items come from there). Nil as ``path(_:)``.
    func place(_ inode: UInt64) -> (path: [UInt8], parent: UInt64, inDatabase: Bool)? {
        table.withLock { table in
            guard let path = Self.path(inode, in: table) else { return nil }
            guard inode != 1, let node = table.nodes[inode] else { return (path, 1, false) }
            return (path, node.parent, table.nodes[node.parent]?.source == .database)
        }
    }

    /// The inode of `name` in `parent` (at `path`), made when new, numbered
    /// ``number(forPath:)`` of `path` where that is free; counts `lookups` lookups and
    /// remembers `seen`. Returns the inode and its generation.
    func inode(_ name: [UInt8], in parent: UInt64, path: [UInt8], lookups: UInt64, seen: Seen?) -> (inode: UInt64, generation: UInt64) {
        inode(name, in: parent, number: Self.number(forPath: path), lookups: lookups, seen: seen)
    }

    /// ``inode(_:in:path:lookups:seen:)`` with the number of the item's path given
    /// (``number(forPath:)``); a folder made here (new to the table) takes `source` when given.
    func inode(_ name: [UInt8], in parent: UInt64, number: UInt64, lookups: UInt64, seen: Seen?, source: Source? = nil)
        -> (inode: UInt64, generation: UInt64)
    {
        table.withLock { table in
            let key = Key(parent: parent, name: name)
            if let inode = table.inodes[key],
                let found = table.nodes.withNode(
                    inode,
                    { node in
                        node.lookups += lookups
                        if let seen { node.seen = seen }
                        if node.source == nil, let source { node.source = source }
                        return (inode, node.generation)
                    })
            {
                return found
            }
            var inode = number
            if table.nodes[inode] != nil {
                inode = table.next
                table.next += 1
            }
            table.nodes[inode] = Node(parent: parent, name: name, lookups: lookups, source: source, seen: seen)
            table.inodes[key] = inode
            return (inode, 0)
        }
    }

    /// The inode the kernel holds for `name` in `parent`, if any.
    func existing(_ name: [UInt8], in parent: UInt64) -> UInt64? {
        table.withLock { $0.inodes[Key(parent: parent, name: name)] }
    }

    /// Counts one more lookup of `inode` (an entry of a listing the kernel took).
    func addLookup(_ inode: UInt64) {
        table.withLock { $0.nodes[inode]?.lookups += 1 }
    }

    /// The generation of `inode` (0 when unknown), remembering `seen` when given.
    func generation(of inode: UInt64, seen: Seen?) -> UInt64 {
        table.withLock { table in
            if let seen, table.nodes[inode] != nil { table.nodes[inode]?.seen = seen }
            return table.nodes[inode]?.generation ?? 0
        }
    }

    /// What the kernel was last told about `inode`.
    func seen(of inode: UInt64) -> Seen? { table.withLock { $0.nodes[inode]?.seen } }

    /// Forgets what the kernel was told about `inode` (it changed through the mount: the kernel
    /// asks again).
    func clearSeen(_ inode: UInt64) { table.withLock { $0.nodes[inode]?.seen = nil } }

    /// The kernel gave back `lookups` of its lookups of `inode`.
    func forget(_ inode: UInt64, lookups: UInt64) {
        guard inode != 1 else { return }
        table.withLock { table in
            guard var node = table.nodes[inode] else { return }
            node.lookups = node.lookups > lookups ? node.lookups - lookups : 0
            if node.lookups > 0 {
                table.nodes[inode] = node
                return
            }
            table.nodes[inode] = nil
            let key = Key(parent: node.parent, name: node.name)
            if table.inodes[key] == inode { table.inodes[key] = nil }
        }
    }

    /// Whatever is named `name` in `parent` was removed or replaced through the mount.
    func detach(_ name: [UInt8], in parent: UInt64) {
        table.withLock { table in
            if let inode = table.inodes.removeValue(forKey: Key(parent: parent, name: name)) {
                table.nodes[inode]?.detached = true
            }
        }
    }

    /// `name` in `parent` was renamed to `newName` in `newParent` (replacing what was there).
    func rename(_ name: [UInt8], in parent: UInt64, to newName: [UInt8], in newParent: UInt64) {
        table.withLock { table in
            let old = Key(parent: parent, name: name)
            let new = Key(parent: newParent, name: newName)
            if let replaced = table.inodes.removeValue(forKey: new) { table.nodes[replaced]?.detached = true }
            if let moved = table.inodes.removeValue(forKey: old) {
                table.nodes[moved]?.parent = newParent
                table.nodes[moved]?.name = newName
                table.inodes[new] = moved
            }
        }
    }

    /// Where the items of the folder `inode` come from, when known.
    func source(of inode: UInt64) -> Source? { table.withLock { $0.nodes[inode]?.source } }

    /// Records where the items of the folder `inode` come from.
    func setSource(_ inode: UInt64, _ source: Source) {
        table.withLock { table in
            table.nodes[inode]?.source = source
            if source == .disk { table.nodes[inode]?.listingDigest = nil }
        }
    }

    /// The folder `inode` and every folder above it hold their items on disk now (populated).
    func setOnDisk(_ inode: UInt64) {
        table.withLock { table in
            var current = inode
            while current != 1, let node = table.nodes[current] {
                if node.source == .database {
                    table.nodes[current]?.source = .disk
                    table.nodes[current]?.listingDigest = nil
                }
                current = node.parent
            }
        }
    }

    /// Records the digest of a complete listing of the folder `inode` from the database, unless
    /// it is on disk meanwhile.
    func setListingDigest(_ inode: UInt64, _ digest: UInt64?) {
        table.withLock { table in
            guard table.nodes[inode]?.source == .database else { return }
            table.nodes[inode]?.listingDigest = digest
        }
    }

    /// One inode the kernel holds, for ``FUSEReplicaMount/refresh()``.
    struct Held: Sendable {
        var inode: UInt64
        var parent: UInt64
        var name: [UInt8]
        var path: [UInt8]
        var seen: Seen?
        /// Answered from the database (its folder is dataless).
        var inDatabase: Bool
        /// A folder's source of items, when known.
        var source: Source?
        var listingDigest: UInt64?
    }

    /// Every inode the kernel holds (the root too, with an empty path), with its path and what
    /// the kernel was told.
    func held() -> [Held] {
        table.withLock { table in
            table.nodes.compactMap { inode, node in
                guard !node.detached, let path = Self.path(inode, in: table) else { return nil }
                return Held(
                    inode: inode, parent: node.parent, name: node.name, path: path, seen: node.seen,
                    inDatabase: inode != 1 && table.nodes[node.parent]?.source == .database, source: node.source,
                    listingDigest: node.listingDigest)
            }
        }
    }

    /// Records what the kernel is told about `inode` now; with `replaced`, a new generation
    /// (the backing file is another one). Returns the new generation.
    @discardableResult
    func update(_ inode: UInt64, seen: Seen?, replaced: Bool) -> UInt64 {
        table.withLock { table in
            guard var node = table.nodes[inode] else { return 0 }
            node.seen = seen
            if replaced { node.generation += 1 }
            table.nodes[inode] = node
            return node.generation
        }
    }
}

extension Dictionary {
    /// Runs `body` on the value of `key` in place (no copy of it out and back), or nil when
    /// there is none.
    fileprivate mutating func withNode<T>(_ key: Key, _ body: (inout Value) -> T) -> T? {
        guard let index = index(forKey: key) else { return nil }
        return body(&values[index])
    }
}
