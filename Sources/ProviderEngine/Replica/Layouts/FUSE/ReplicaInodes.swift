import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The inodes a ``ReplicaFileSystem`` handed to the kernel, by name in their folder: what the
/// kernel holds and nothing more. The root is 1; every other name gets a number when the kernel
/// first looks it up and keeps it while the kernel holds a lookup of it (``forget(_:lookups:)``
/// drops it), so the table is as small as the kernel's cache of the mount, whatever the size of
/// the domain. A renamed item keeps its number.
///
/// The number is the backing file's inode number, so an item has the same one however often
/// the kernel forgets and looks it up again, and across restarts of `serve` (`git` keeps inode
/// numbers in its index; a new one makes it read the file again). A file the engine replaces (a
/// new version, an eviction) is another backing file, but keeps the number the kernel holds,
/// with a new generation. Where that number is taken (a number reused by the backing file
/// system while the kernel still holds a removed file's) or is 1, a number from 2^40 up is used.
///
/// Each entry remembers what the backing file was when the kernel was last told (its inode in
/// the backing folder, size, modification time), so that after a sync ``changes()`` finds what
/// changed behind the kernel's back. Any thread.
final class ReplicaInodes: Sendable {
    /// What the kernel was last told about a backing file.
    struct Seen: Equatable, Sendable {
        var backingInode: UInt64
        var size: Int64
        var modification: timespec

        init(_ status: stat) {
            backingInode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            modification = status.st_mtim
        }

        static func == (a: Seen, b: Seen) -> Bool {
            a.backingInode == b.backingInode && a.size == b.size && a.modification.tv_sec == b.modification.tv_sec
                && a.modification.tv_nsec == b.modification.tv_nsec
        }
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
        /// A folder known not to be dataless any more (its items are on disk).
        var populated = false
        var seen: Seen?
    }

    private struct Key: Hashable {
        var parent: UInt64
        var name: [UInt8]
    }

    private struct Table {
        var nodes: [UInt64: Node] = [1: Node(parent: 1, name: [], lookups: 1)]
        var inodes: [Key: UInt64] = [:]
        /// The next number for a name whose backing inode number cannot be used.
        var next: UInt64 = 1 << 40
    }

    private let table = Mutex(Table())

    /// The path of `inode` relative to the backing folder (empty for the root), or nil when the
    /// kernel holds no such inode or it was removed.
    func path(_ inode: UInt64) -> [UInt8]? {
        table.withLock { table in
            var parts: [[UInt8]] = []
            var current = inode
            while current != 1 {
                guard let node = table.nodes[current], !node.detached else { return nil }
                parts.append(node.name)
                current = node.parent
            }
            return Array(parts.reversed().joined(separator: [UInt8(ascii: "/")]))
        }
    }

    /// The inode of `name` in `parent`, made when new; counts `lookups` lookups and remembers
    /// `seen`. Returns the inode and its generation.
    func inode(_ name: [UInt8], in parent: UInt64, lookups: UInt64, seen: Seen?) -> (inode: UInt64, generation: UInt64) {
        table.withLock { table in
            let key = Key(parent: parent, name: name)
            if let inode = table.inodes[key], var node = table.nodes[inode] {
                node.lookups += lookups
                if let seen { node.seen = seen }
                table.nodes[inode] = node
                return (inode, node.generation)
            }
            var inode = seen?.backingInode ?? 0
            if inode <= 1 || inode >= 1 << 40 || table.nodes[inode] != nil {
                inode = table.next
                table.next += 1
            }
            table.nodes[inode] = Node(parent: parent, name: name, lookups: lookups, seen: seen)
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

    /// Whether the folder `inode` is known to hold its items on disk.
    func isPopulated(_ inode: UInt64) -> Bool { table.withLock { $0.nodes[inode]?.populated ?? false } }

    /// Remembers that the folder `inode` holds its items on disk.
    func setPopulated(_ inode: UInt64) { table.withLock { $0.nodes[inode]?.populated = true } }

    /// One inode the kernel holds, for ``changes()``.
    struct Held: Sendable {
        var inode: UInt64
        var parent: UInt64
        var name: [UInt8]
        var path: [UInt8]
        var seen: Seen?
    }

    /// Every inode the kernel holds but the root, with its path and what the kernel was told.
    func held() -> [Held] {
        let entries = table.withLock { table in
            table.nodes.compactMap { inode, node in
                inode == 1 || node.detached ? nil : (inode, node.parent, node.name, node.seen)
            }
        }
        return entries.compactMap { inode, parent, name, seen in
            path(inode).map { Held(inode: inode, parent: parent, name: name, path: $0, seen: seen) }
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
