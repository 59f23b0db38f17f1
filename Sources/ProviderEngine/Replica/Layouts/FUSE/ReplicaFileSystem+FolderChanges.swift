import Foundation
import ProviderCore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Changes to a folder's entries through the mount: `create`, `mkdir`, `symlink`, `unlink`,
/// `rmdir` and `rename`. Each goes to the backing folder (a dataless folder is populated first,
/// so that a change applies to what a program saw) and is recorded in the domain's
/// ``ReplicaChangeFeed`` before the reply makes it visible.
extension ReplicaFileSystem {
    func create(_ name: FUSEName, in parent: UInt64, mode: UInt32, flags: Int32, by requester: FUSERequester)
        throws(FUSEError) -> (FUSEAttributes, FUSEOpenFile)
    {
        let folder = try relative(parent)
        try populated(parent, folder)
        let path = Self.join(folder, name.bytes)
        let fd = withBytePath(absolute(path)) { Glibc.open($0, flags | O_CREAT | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw .lastCall() }
        inodes.clearSeen(parent)
        var status = stat()
        fstat(fd, &status)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, path: path, lookups: 1, seen: ReplicaInodes.Seen(status))
        if flags & O_ACCMODE != O_RDONLY { startWriting(inode, path) } else { feed.itemChanged(text(path)) }
        return (attributes(inode, status, generation: generation), FUSEOpenFile(descriptor: fd, isComplete: true))
    }

    func makeFolder(_ name: FUSEName, in parent: UInt64, mode: UInt32, by requester: FUSERequester) throws(FUSEError)
        -> FUSEAttributes
    {
        let folder = try relative(parent)
        try populated(parent, folder)
        let path = Self.join(folder, name.bytes)
        guard withBytePath(absolute(path), { mkdir($0, mode) }) == 0 else { throw .lastCall() }
        inodes.clearSeen(parent)
        let status = try status(path)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, path: path, lookups: 1, seen: ReplicaInodes.Seen(status))
        inodes.setSource(inode, .disk)
        feed.folderMade(text(path))
        return attributes(inode, status, generation: generation)
    }

    func makeSymbolicLink(_ name: FUSEName, in parent: UInt64, target: [UInt8], by requester: FUSERequester)
        throws(FUSEError) -> FUSEAttributes
    {
        let folder = try relative(parent)
        try populated(parent, folder)
        let path = Self.join(folder, name.bytes)
        let result = withBytePath(target) { target in withBytePath(absolute(path)) { symlink(target, $0) } }
        guard result == 0 else { throw .lastCall() }
        feed.itemChanged(text(path))
        inodes.clearSeen(parent)
        let status = try status(path)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, path: path, lookups: 1, seen: ReplicaInodes.Seen(status))
        return attributes(inode, status, generation: generation)
    }

    func remove(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) {
        let folder = try relative(parent)
        try populated(parent, folder)
        let path = Self.join(folder, name.bytes)
        guard withBytePath(absolute(path), { unlink($0) }) == 0 else { throw .lastCall() }
        feed.itemChanged(text(path))
        inodes.clearSeen(parent)
        inodes.detach(name.bytes, in: parent)
    }

    func removeFolder(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) {
        let folder = try relative(parent)
        try populated(parent, folder)
        let path = Self.join(folder, name.bytes)
        // A dataless folder is empty on disk but not in the store: one that holds items in the
        // database is not empty (nothing written to say so); an empty one is populated first,
        // so that removing it removes only what a program saw.
        if holdsStoredItems(path) { throw .notEmpty }
        try populateBeforeRemoval(path)
        guard withBytePath(absolute(path), { rmdir($0) }) == 0 else { throw .lastCall() }
        feed.itemChanged(text(path))
        inodes.clearSeen(parent)
        inodes.detach(name.bytes, in: parent)
    }

    /// Writes the items of the dataless folder at `path` before it is removed or replaced.
    /// - Throws: `ioError` when they cannot be written (the folder is then kept).
    private func populateBeforeRemoval(_ path: [UInt8]) throws(FUSEError) {
        guard let status = try? status(path), status.st_mode & S_IFMT == S_IFDIR else { return }
        guard fetcher.populateIfDataless(text(path)) else { throw .ioError }
    }

    func rename(
        _ name: FUSEName, in parent: UInt64, to newName: FUSEName, in newParent: UInt64, flags: FUSERenameFlags,
        by requester: FUSERequester
    ) throws(FUSEError) {
        guard flags.subtracting(.noReplace).isEmpty else { throw .invalid }
        let folder = try relative(parent)
        let newFolder = try relative(newParent)
        try populated(parent, folder)
        try populated(newParent, newFolder)
        let from = Self.join(folder, name.bytes)
        let to = Self.join(newFolder, newName.bytes)
        // A dataless folder moves with its items (its database rows stay at the old path until
        // the next sync records the move).
        let moved = inodes.existing(name.bytes, in: parent)
        if storedItem(from).map({ $0.kind == .folder && $0.isDataless }) == true {
            guard fetcher.populateIfDataless(text(from)) else { throw .ioError }
            if let moved { inodes.setSource(moved, .disk) }
        }
        try populateBeforeRemoval(to)
        let result = withBytePath(absolute(from)) { from in
            withBytePath(absolute(to)) { to in
                flags.contains(.noReplace) ? SystemCalls.renameNoReplace(from, to) : Glibc.rename(from, to)
            }
        }
        guard result == 0 else { throw .lastCall() }
        recordMove(from: from, to: to, moved: moved)
        inodes.clearSeen(parent)
        inodes.clearSeen(newParent)
        inodes.rename(name.bytes, in: parent, to: newName.bytes, in: newParent)
    }

    /// Records a rename in the feed: both folders (a folder with what is below it), and a file
    /// renamed into place that no program writes as finished (an editor's save: written under
    /// another name, renamed over the item).
    private func recordMove(from: [UInt8], to: [UInt8], moved: UInt64?) {
        var status = stat()
        let found = withBytePath(absolute(to)) { lstat($0, &status) } == 0
        let isFolder = found && status.st_mode & S_IFMT == S_IFDIR
        feed.moved(from: text(from), to: text(to), isFolder: isFolder)
        if found && status.st_mode & S_IFMT == S_IFREG && !(moved.map(isBeingWritten) ?? false) {
            feed.finished(text(to), modificationNanos: Replica.nanoseconds(status.st_mtim))
        }
    }
}
