import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What a FUSE domain's replica path shows (``FUSELayout``): the domain's backing folder, as
/// the engine keeps it, with dataless files fetched when programs read them. `serve` mounts it
/// (``FUSEReplicaMount``).
///
/// - **Names and attributes** of a populated folder's items come from the backing folder, which
///   holds every item of it, a dataless file (real size and dates, no contents) for each file
///   not downloaded. Those of a folder the database calls dataless (never written to disk) come
///   from the database (``ReplicaFileSystem+Database.swift``): `lookup`, `getattr` and listings
///   write nothing and never reach the store. Such a folder is populated (its items written,
///   ``ReplicaFetcher/populateIfDataless(_:)``) only when something needs its backing entries:
///   an open of one of its files, a change in it (create, `mkdir`, `symlink`, `rename`,
///   `unlink`, `rmdir`), a `setattr` or an extended attribute set on one of its items.
/// - **Listings** are read once per open folder (``ReplicaFolderReader``), and the kernel keeps
///   them (`FOPEN_CACHE_DIR`): it drops one when the folder changes through the mount, and
///   ``FUSEReplicaMount/refresh()`` tells it when a sync changed a folder behind it.
/// - **Contents**: `open` returns the backing file's descriptor, complete files with the kernel's
///   cache kept (`FOPEN_KEEP_CACHE`); a read is answered from that descriptor (spliced) once the
///   bytes it needs are present, fetched through the engine (``ReplicaFetcher``) when they are
///   not. The kernel answers `lseek` from the size: no holes.
/// - **Changes** (writes, creates, `mkdir`, `symlink`, `unlink`, `rmdir`, `rename`, `truncate`,
///   `chmod`, times; a folder's entries in ``ReplicaFileSystem+FolderChanges.swift``) go to the backing folder and are recorded in the domain's
///   ``ReplicaChangeFeed`` before the reply that makes them visible: the folder each changed in
///   (a folder made or moved, with what is below it), and a file opened for writing as being
///   written until its last release, then finished with its modification time. The next sync
///   compares only those folders and sends a finished file without the settle wait. A dataless
///   file is made whole before a program changes it, or loses its mark when a program empties
///   it (`O_TRUNC`): nothing uploads bytes that were never fetched.
///
/// - **Extended attributes** (``ReplicaFileSystem+ExtendedAttributes.swift``): the backing
///   file's, with the status a dataless file has (`dataless`) and the engine's own marks kept
///   to itself. Never a fetch.
///
/// Every method gets the requester (pid, uid): access rules by program go through
/// ``admit(_:to:present:)``, the one place every fetch passes (``AccessGate``, as fanotify's
/// handler asks it). Threads: the session's, several at once.
final class ReplicaFileSystem: FUSEFileSystem {
    /// The backing folder, absolute, without a final `/`.
    let backing: String
    let inodes = ReplicaInodes()
    let fetcher: ReplicaFetcher
    let logger: Logger
    /// Access rules by program.
    let gate: AccessGate
    /// The owner, group and permission bits of items answered from the database: what the
    /// engine gives the backing files it writes (this process's user, `0644`/`0755` less its
    /// umask).
    let owner: UInt32
    let group: UInt32
    let fileMode: UInt32
    let folderMode: UInt32
    /// How many opens for writing each inode has (a file a program writes changes size and
    /// date through the mount, not behind it).
    private let writers = Mutex<[UInt64: Int]>([:])
    /// Where each change programs make is recorded (what sync up compares).
    let feed: ReplicaChangeFeed
    /// The folders open for listing, by handle.
    let readers = Mutex<(next: UInt64, open: [UInt64: ReplicaFolderReader])>((1, [:]))
    /// Told of each folder a program opens (its relative path): serve's thumbnails.
    let folderOpened: FUSEReplicaMount.FolderOpened?

    init(
        backing: String, fetcher: ReplicaFetcher, gate: AccessGate, feed: ReplicaChangeFeed, logger: Logger,
        folderOpened: FUSEReplicaMount.FolderOpened? = nil
    ) {
        self.folderOpened = folderOpened
        self.backing = backing.hasSuffix("/") && backing.count > 1 ? String(backing.dropLast()) : backing
        self.fetcher = fetcher
        self.feed = feed
        self.gate = gate
        self.logger = logger
        owner = getuid()
        group = getgid()
        let umask = Self.processUmask()
        fileMode = 0o644 & ~umask
        folderMode = 0o755 & ~umask
    }

    // MARK: Paths

    /// The path of `inode` relative to the backing folder.
    /// - Throws: `noEntry` when the kernel holds no such inode (or it was removed).
    func relative(_ inode: UInt64) throws(FUSEError) -> [UInt8] {
        guard let path = inodes.path(inode) else { throw .noEntry }
        return path
    }

    private func relative(_ name: FUSEName, in parent: UInt64) throws(FUSEError) -> [UInt8] {
        Self.join(try relative(parent), name.bytes)
    }

    /// The path of `name` in the folder at `folder` (relative paths).
    static func join(_ folder: [UInt8], _ name: [UInt8]) -> [UInt8] {
        folder.isEmpty ? name : folder + [UInt8(ascii: "/")] + name
    }

    func absolute(_ relative: [UInt8]) -> [UInt8] {
        relative.isEmpty ? Array(backing.utf8) : Array(backing.utf8) + [UInt8(ascii: "/")] + relative
    }

    /// A relative path as the database keys items (UTF-8; a name that is not is no item's).
    func text(_ relative: [UInt8]) -> String { String(decoding: relative, as: UTF8.self) }

    func status(_ relative: [UInt8]) throws(FUSEError) -> stat {
        var status = stat()
        guard withBytePath(absolute(relative), { lstat($0, &status) }) == 0 else { throw .lastCall() }
        return status
    }

    func attributes(_ inode: UInt64, _ status: stat, generation: UInt64) -> FUSEAttributes {
        var attributes = FUSEAttributes(inode: inode, stat: status)
        attributes.generation = generation
        return attributes
    }

    /// The attributes of `inode` now, remembered as what the kernel was told.
    private func answer(_ inode: UInt64, _ status: stat) -> FUSEAttributes {
        attributes(inode, status, generation: inodes.generation(of: inode, seen: recordable(inode, status)))
    }

    /// What a lookup or `getattr` of `inode` remembers as told to the kernel: the file as it is
    /// now, unless its contents changed behind the kernel (a regular file of another size, date
    /// or backing file, not written through the mount): that is left for
    /// ``FUSEReplicaMount/refresh()`` to tell, or the kernel would keep the pages and (writeback
    /// cache) the size it has, and the next refresh would find nothing to tell.
    func recordable(_ inode: UInt64?, _ status: stat) -> ReplicaInodes.Seen? {
        let now = ReplicaInodes.Seen(status)
        guard let inode, status.st_mode & S_IFMT == S_IFREG, let old = inodes.seen(of: inode), old.isOnDisk, !isBeingWritten(inode)
        else { return now }
        let same =
            old.size == now.size && old.backingInode == now.backingInode && old.modification.tv_sec == now.modification.tv_sec
            && old.modification.tv_nsec == now.modification.tv_nsec
        return same ? now : nil
    }

    /// Makes sure the folder `inode` at `path` holds its items on disk (populated, with the
    /// dataless folders above it) before a program changes something in it.
    /// - Throws: `ioError` when it cannot be populated (the database or the disk failed, or it
    ///   took longer than ``ReplicaFetcher/populateLimit``).
    func populated(_ inode: UInt64, _ path: [UInt8]) throws(FUSEError) {
        guard source(ofFolder: inode, path) == .database else { return }
        guard fetcher.populateIfDataless(text(path)) else { throw .ioError }
        inodes.setOnDisk(inode)
    }

    /// Makes sure the item `inode` has its backing entry (its folder populated) before a
    /// program opens or changes it; returns its path.
    /// - Throws: `noEntry` when the kernel holds no such inode; as ``populated(_:_:)``.
    func onDisk(_ inode: UInt64) throws(FUSEError) -> [UInt8] {
        guard let place = inodes.place(inode) else { throw .noEntry }
        if place.inDatabase { try populated(place.parent, try relative(place.parent)) }
        return place.path
    }

    /// Whether `requester` may have the bytes it needs of `path` (`present`: they are there
    /// already) by the access rules; every fetch passes here. A refusal is logged and recorded
    /// by the gate. Blocking (reads `/proc`).
    /// - Throws: `notPermitted` (EPERM, ``AccessDecision/errno``) when a rule refuses, or when
    ///   the bytes are missing and the program may not fetch.
    private func admit(_ requester: FUSERequester, to path: String, present: Bool) throws(FUSEError) {
        let decision = gate.decide(
            pid: requester.processIdentifier, domainID: fetcher.domainID, domain: fetcher.domain, path: path, present: present)
        if decision.refuses || (!present && !decision.mayFetch) { throw .notPermitted }
    }

    /// A fetch's failure as the program's call fails: ENOSPC for a full disk, else EIO. Recorded
    /// as the item's last error (`why`) and, where the store or the disk failed, as its status
    /// ``ReplicaStatus/error`` on the backing file.
    private func failure(_ error: FileProviderError, _ path: String, _ requester: FUSERequester) -> FUSEError {
        logger.error(
            "\(fetcher.domain): \(TerminalText.quoted(path)): not fetched for process \(requester.processIdentifier): \(error.message)")
        fetcher.recordFailure(error, path: path)
        if ReplicaStatus.marksFailedFetch(error.code) {
            ReplicaStatus.markFetchFailed(atPath: String(decoding: absolute(Array(path.utf8)), as: UTF8.self), domain: fetcher.domain)
        }
        return error.code == .fileWriteOutOfSpace ? .noSpace : .ioError
    }

    // MARK: Names

    func lookup(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEAttributes {
        let folder = try relative(parent)
        let path = Self.join(folder, name.bytes)
        if source(ofFolder: parent, folder) == .database {
            guard let record = storedItem(path) else { throw .noEntry }
            if !isWrittenBehind(record, at: path, in: parent) {
                let (inode, generation) = inodes.inode(name.bytes, in: parent, path: path, lookups: 1, seen: storedSeen(record))
                noteSource(of: inode, record)
                return storedAttributes(record, inode: inode, generation: generation)
            }
        }
        let status = try status(path)
        let seen = recordable(inodes.existing(name.bytes, in: parent), status)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, path: path, lookups: 1, seen: seen)
        return told(inode, path, status, generation: generation)
    }

    /// The attributes of `inode` at `path`, on disk as `status`, remembered as what the kernel
    /// was told: a folder on disk that the database calls dataless (the empty folder the engine
    /// writes) answers its record's, as the items below it do, so that what the kernel was told
    /// stays when the folder is populated (its date on disk is the population's).
    func told(_ inode: UInt64, _ path: [UInt8], _ status: stat, generation: UInt64) -> FUSEAttributes {
        if status.st_mode & S_IFMT == S_IFDIR, inode != 1, source(ofFolder: inode, path) == .database, let record = storedItem(path),
            record.kind == .folder
        {
            return storedAttributes(record, inode: inode, generation: inodes.generation(of: inode, seen: storedSeen(record)))
        }
        return attributes(inode, status, generation: generation)
    }

    func forget(_ inode: UInt64, lookups: UInt64) { inodes.forget(inode, lookups: lookups) }

    func attributes(of inode: UInt64, descriptor: Int32?, by requester: FUSERequester) throws(FUSEError) -> FUSEAttributes {
        if let descriptor {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { throw .lastCall() }
            return answer(inode, status)
        }
        guard let place = inodes.place(inode) else { throw .noEntry }
        if place.inDatabase {
            guard let record = storedItem(place.path) else { throw .noEntry }
            return storedAttributes(record, inode: inode, generation: inodes.generation(of: inode, seen: storedSeen(record)))
        }
        // A folder the kernel was told about from the database and populated since (for a
        // program that opened one of its files) keeps those attributes until something changes
        // in it: its date on disk is the population's, which `tar` would take for a change.
        if let seen = inodes.seen(of: inode), !seen.isOnDisk, seen.mode & UInt32(S_IFMT) == UInt32(S_IFDIR),
            let record = storedItem(place.path), record.kind == .folder
        {
            return storedAttributes(record, inode: inode, generation: inodes.generation(of: inode, seen: nil))
        }
        let status = try status(place.path)
        return told(inode, place.path, status, generation: inodes.generation(of: inode, seen: recordable(inode, status)))
    }

    func setAttributes(_ changes: FUSEAttributeChanges, of inode: UInt64, descriptor: Int32?, by requester: FUSERequester)
        throws(FUSEError) -> FUSEAttributes
    {
        let path = try onDisk(inode)
        let full = absolute(path)
        if let size = changes.size {
            try prepareForChange(path, emptying: size == 0, descriptor: descriptor, by: requester)
            let result = descriptor.map { ftruncate($0, off_t(size)) } ?? withBytePath(full) { truncate($0, off_t(size)) }
            guard result == 0 else { throw .lastCall() }
        }
        if let mode = changes.mode {
            let result = descriptor.map { fchmod($0, mode) } ?? withBytePath(full) { chmod($0, mode) }
            guard result == 0 else { throw .lastCall() }
        }
        if changes.owner != nil || changes.group != nil {
            let owner = changes.owner ?? UInt32.max
            let group = changes.group ?? UInt32.max
            guard withBytePath(full, { lchown($0, owner, group) }) == 0 else { throw .lastCall() }
        }
        if changes.accessTime != nil || changes.modificationTime != nil {
            func time(_ change: FUSEAttributeChanges.Time?) -> timespec {
                switch change {
                case nil: return timespec(tv_sec: 0, tv_nsec: SystemCalls.omitTime)
                // UTIME_NOW is UTIME_OMIT + 1 in <sys/stat.h> (Glibc's module shows neither).
                case .now: return timespec(tv_sec: 0, tv_nsec: SystemCalls.omitTime + 1)
                case .at(let stamp): return stamp.timespec
                }
            }
            var times = [time(changes.accessTime), time(changes.modificationTime)]
            let result =
                descriptor.map { futimens($0, &times) }
                ?? withBytePath(full) { utimensat(AT_FDCWD, $0, &times, AT_SYMLINK_NOFOLLOW) }
            guard result == 0 else { throw .lastCall() }
        }
        recordChange(of: inode, path, changes, descriptor: descriptor)
        return try attributes(of: inode, descriptor: descriptor, by: requester)
    }

    /// Records a `setattr` of `inode` at `path` in the feed: a truncate or new date of a file no
    /// program has open for writing (`truncate -s`, `touch`) is finished at once (no release
    /// will come); one being written finishes at its last release.
    private func recordChange(of inode: UInt64, _ path: [UInt8], _ changes: FUSEAttributeChanges, descriptor: Int32?) {
        let name = text(path)
        guard changes.size != nil || changes.modificationTime != nil, !isBeingWritten(inode) else {
            feed.itemChanged(name)
            return
        }
        var status = stat()
        let found = descriptor.map { fstat($0, &status) } ?? withBytePath(absolute(path)) { lstat($0, &status) }
        if found == 0 && status.st_mode & S_IFMT == S_IFREG {
            feed.finished(name, modificationNanos: Replica.nanoseconds(status.st_mtim))
        } else {
            feed.itemChanged(name)
        }
    }

    // MARK: Contents

    /// Before a program changes the file at `path`: a dataless file it empties loses its mark
    /// (nothing to fetch); one it changes otherwise is fetched whole first.
    private func prepareForChange(_ path: [UInt8], emptying: Bool, descriptor: Int32?, by requester: FUSERequester)
        throws(FUSEError)
    {
        let name = text(path)
        let full = String(decoding: absolute(path), as: UTF8.self)
        guard Replica.datalessOwner(atPath: full) != nil else { return }
        if emptying {
            let fd = descriptor ?? Glibc.open(full, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { throw .lastCall() }
            defer { if descriptor == nil { close(fd) } }
            do { try fetcher.emptied(name, descriptor: fd) } catch { throw failure(error, name, requester) }
            return
        }
        try admit(requester, to: name, present: false)
        do { try fetcher.complete(name, absolute: full, program: requester.processIdentifier) } catch {
            throw failure(error, name, requester)
        }
    }

    func open(_ inode: UInt64, flags: Int32, by requester: FUSERequester) throws(FUSEError) -> FUSEOpenFile {
        let path = try onDisk(inode)
        let writing = flags & O_ACCMODE != O_RDONLY
        let truncating = flags & O_TRUNC != 0 && writing
        if writing && !truncating { try prepareForChange(path, emptying: false, descriptor: nil, by: requester) }
        let fd = withBytePath(absolute(path)) { Glibc.open($0, (flags & ~(O_CREAT | O_EXCL | O_NOCTTY)) | O_CLOEXEC) }
        guard fd >= 0 else { throw .lastCall() }
        if truncating {
            do { try prepareForChange(path, emptying: true, descriptor: fd, by: requester) } catch {
                close(fd)
                throw error
            }
        }
        fetcher.opened(text(path))
        fetcher.manager.useRecorder.used(domainID: fetcher.domainID, path: text(path))
        if writing { startWriting(inode, path) }
        return FUSEOpenFile(descriptor: fd, isComplete: Replica.datalessKey(ofDescriptor: fd) == nil)
    }

    /// A program opened `inode` at `path` for writing: being written until its last release.
    func startWriting(_ inode: UInt64, _ path: [UInt8]) {
        writers.withLock { $0[inode, default: 0] += 1 }
        feed.writing(text(path))
    }

    /// Whether a program has the file `inode` open for writing through the mount.
    func isBeingWritten(_ inode: UInt64) -> Bool { writers.withLock { $0[inode] != nil } }

    func read(
        _ inode: UInt64, descriptor: Int32, offset: UInt64, count: Int, by requester: FUSERequester, answer: () -> Void
    ) throws(FUSEError) {
        guard Replica.datalessKey(ofDescriptor: descriptor) != nil else { return }
        let path = text(try relative(inode))
        let start = Int64(clamping: offset)
        let (end, overflow) = start.addingReportingOverflow(Int64(count))
        let wanted = start..<(overflow ? Int64.max : end)
        try admit(requester, to: path, present: fetcher.holds(descriptor: descriptor, range: wanted))
        do {
            // Not kept past the call: the fetcher runs it before it returns, or never.
            try withoutActuallyEscaping(answer) { (answer) throws(FileProviderError) in
                try fetcher.provide(path, descriptor: descriptor, range: wanted, program: requester.processIdentifier, answer: answer)
            }
        } catch {
            // Filled meanwhile by another request: the bytes are there.
            if Replica.datalessKey(ofDescriptor: descriptor) == nil { return }
            throw failure(error, path, requester)
        }
    }

    func write(_ inode: UInt64, descriptor: Int32, bytes: UnsafeRawBufferPointer, offset: UInt64, by requester: FUSERequester)
        throws(FUSEError) -> Int
    {
        // A file opened for writing was made whole at open; a write through another open of a
        // file still dataless (a map, the writeback cache) makes it whole first.
        if Replica.datalessKey(ofDescriptor: descriptor) != nil {
            try prepareForChange(try relative(inode), emptying: false, descriptor: descriptor, by: requester)
        }
        var done = 0
        while done < bytes.count {
            let written = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            guard written > 0 else { throw .lastCall() }
            done += written
        }
        var status = stat()
        if fstat(descriptor, &status) == 0 { _ = inodes.generation(of: inode, seen: ReplicaInodes.Seen(status)) }
        // Recorded again: a sync may have taken the folder since the open (a write through a
        // map or the writeback cache may come after the program's close).
        if let path = inodes.path(inode) { feed.writing(text(path)) }
        return done
    }

    func synchronize(_ inode: UInt64, descriptor: Int32, dataOnly: Bool, by requester: FUSERequester) throws(FUSEError) {
        guard (dataOnly ? fdatasync(descriptor) : fsync(descriptor)) == 0 else { throw .lastCall() }
    }

    func release(_ inode: UInt64, descriptor: Int32, flags: Int32) {
        guard flags & O_ACCMODE != O_RDONLY else { return }
        let last = writers.withLock { writers -> Bool in
            let count = (writers[inode] ?? 1) - 1
            writers[inode] = count > 0 ? count : nil
            return count <= 0
        }
        // The last writer let go: finished, as it is now (its name as the kernel knows it).
        guard let path = inodes.path(inode) else { return }
        var status = stat()
        if last, fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG {
            feed.finished(text(path), modificationNanos: Replica.nanoseconds(status.st_mtim))
        } else {
            feed.itemChanged(text(path))
        }
    }

    func statistics(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEVolumeStatistics {
        var result = statvfs()
        guard statvfs(backing, &result) == 0 else { throw .lastCall() }
        return FUSEVolumeStatistics(result)
    }
}

/// Calls `body` with `path` as a NUL-terminated C string.
func withBytePath<T>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
    try (path + [0]).withUnsafeBufferPointer { bytes in
        try bytes.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
    }
}
