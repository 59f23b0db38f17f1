import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Folder listings through the mount (``ReplicaFileSystem``): an open folder's listing is read
/// once (``ReplicaFolderReader``: the backing folder's, or a dataless folder's rows from the
/// database) and kept per open handle; symbolic links' targets.
extension ReplicaFileSystem {
    func openFolder(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEOpenFolder {
        let reader = try reader(of: inode)
        let handle = readers.withLock { readers in
            let handle = readers.next
            readers.next += 1
            readers.open[handle] = reader
            return handle
        }
        folderOpened?(fetcher.domain, text(reader.path), requester.processIdentifier, requester.userIdentifier)
        return FUSEOpenFolder(handle: handle, keepsListing: true)
    }

    func releaseFolder(_ inode: UInt64, handle: UInt64) {
        _ = readers.withLock { $0.open.removeValue(forKey: handle) }
    }

    func list(_ folder: UInt64, after cookie: UInt64, into sink: inout FUSEListingSink, by requester: FUSERequester)
        throws(FUSEError)
    {
        try list(folder, handle: 0, after: cookie, into: &sink, by: requester)
    }

    func list(_ folder: UInt64, handle: UInt64, after cookie: UInt64, into sink: inout FUSEListingSink, by requester: FUSERequester)
        throws(FUSEError)
    {
        let open = handle == 0 ? nil : readers.withLock { $0.open[handle] }
        let reader: ReplicaFolderReader
        if let open { reader = open } else { reader = try self.reader(of: folder) }
        reader.lock.lock()
        defer { reader.lock.unlock() }
        try reader.seek(to: cookie)
        if reader.fromDatabase {
            try listStored(folder, reader, into: &sink)
            return
        }
        while let entry = try reader.peek() {
            let name = FUSEName(bytes: entry.name)
            let child = Self.join(reader.path, entry.name)
            let next = reader.position + 1
            if sink.countsLookups {
                guard let status = reader.status(of: entry.name) else {
                    // Gone meanwhile.
                    reader.take()
                    continue
                }
                let seen = recordable(inodes.existing(entry.name, in: folder), status)
                let (inode, generation) = inodes.inode(entry.name, in: folder, path: child, lookups: 1, seen: seen)
                guard sink.add(name, told(inode, child, status, generation: generation), cookie: next) else {
                    inodes.forget(inode, lookups: 1)
                    return
                }
            } else {
                // Not a lookup: the name and kind (from the stream), under the number a lookup
                // would give (or the one the kernel holds).
                let inode = inodes.existing(entry.name, in: folder) ?? ReplicaInodes.number(forPath: child)
                var kind = ReplicaFolderReader.modeBits(ofType: entry.type)
                if kind == 0, let status = reader.status(of: entry.name) { kind = status.st_mode & S_IFMT }
                let attributes = FUSEAttributes(
                    inode: inode, mode: kind, size: 0, owner: owner, group: group, modificationTime: FUSETimestamp(seconds: 0))
                guard sink.add(name, attributes, cookie: next) else { return }
            }
            reader.take()
        }
    }

    /// The listing of the dataless folder `folder` from the database, from where `reader` is.
    /// Each entry's name goes to the kernel from the page's buffer and its number is hashed
    /// on from the folder's path (nothing joined, nothing allocated but a name new to the
    /// inode table); a folder entry that is dataless is recorded as listing from the database
    /// as its inode is made.
    private func listStored(_ folder: UInt64, _ reader: ReplicaFolderReader, into sink: inout FUSEListingSink) throws(FUSEError) {
        let folderHash = ReplicaInodes.pathHash(reader.path)
        let root = reader.path.isEmpty
        while let entry = try reader.peekStored() {
            let next = reader.position + 1
            let (seen, told) = stored(entry)
            let countsLookups = sink.countsLookups
            let added = reader.page.withName(of: entry) { name -> Bool in
                var attributes = told
                let number = ReplicaInodes.number(of: name, inFolderHashed: folderHash, root: root)
                let cName = UnsafeRawPointer(name.baseAddress!).assumingMemoryBound(to: CChar.self)
                if countsLookups {
                    // Counted as a lookup at once (one lock per entry), given back when the
                    // kernel's buffer is full.
                    let source: ReplicaInodes.Source? = entry.kind == .folder && entry.isDataless ? .database : nil
                    let (inode, generation) = inodes.inode(Array(name), in: folder, number: number, lookups: 1, seen: seen, source: source)
                    attributes.inode = inode
                    attributes.generation = generation
                    guard sink.add(cName: cName, attributes, cookie: next) else {
                        inodes.forget(inode, lookups: 1)
                        return false
                    }
                    return true
                }
                attributes.inode = inodes.existing(Array(name), in: folder) ?? number
                return sink.add(cName: cName, attributes, cookie: next)
            }
            guard added else { return }
            reader.take()
        }
        if let digest = reader.digest { inodes.setListingDigest(folder, digest) }
    }

    /// A new reader of the folder `inode`'s listing, from where its items come from now.
    /// - Throws: `noEntry` when the kernel holds no such inode.
    private func reader(of inode: UInt64) throws(FUSEError) -> ReplicaFolderReader {
        let path = try relative(inode)
        return ReplicaFolderReader(
            folder: inode, path: path, fromDatabase: source(ofFolder: inode, path) == .database, store: fetcher.manager.store,
            domainID: fetcher.domainID, backing: Array(backing.utf8))
    }

    func readLink(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [UInt8] {
        guard let place = inodes.place(inode) else { throw .noEntry }
        if place.inDatabase {
            guard let record = storedItem(place.path) else { throw .noEntry }
            guard record.kind == .symlink, let target = record.symlinkTarget else { throw .invalid }
            return Array(target.utf8)
        }
        let path = absolute(place.path)
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = withBytePath(path) { readlink($0, &buffer, buffer.count - 1) }
        guard count >= 0 else { throw .lastCall() }
        return buffer[..<count].map { UInt8(bitPattern: $0) }
    }
}
