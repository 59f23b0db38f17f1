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
/// - **Names and attributes** come from the backing folder, which holds every item of each
///   folder the engine populated, a dataless file (real size and dates, no contents) for each
///   file not downloaded. A folder the database still calls dataless is populated from the
///   database before it is looked in or listed (never from the store). Nothing here reaches
///   the store.
/// - **Contents**: `open` returns the backing file's descriptor, complete files with the kernel's
///   cache kept (`FOPEN_KEEP_CACHE`); a read is answered from that descriptor (spliced) once the
///   bytes it needs are present, fetched through the engine (``ReplicaFetcher``) when they are
///   not. The kernel answers `lseek` from the size: no holes.
/// - **Changes** (writes, creates, `mkdir`, `unlink`, `rename`, `truncate`, `chmod`, times) go
///   to the backing folder, where the engine's watcher and scan find them and the next sync
///   sends them. A dataless file is made whole before a program changes it, or loses its mark
///   when a program empties it (`O_TRUNC`): nothing uploads bytes that were never fetched.
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

    init(backing: String, fetcher: ReplicaFetcher, gate: AccessGate, logger: Logger) {
        self.backing = backing.hasSuffix("/") && backing.count > 1 ? String(backing.dropLast()) : backing
        self.fetcher = fetcher
        self.gate = gate
        self.logger = logger
    }

    // MARK: Paths

    /// The path of `inode` relative to the backing folder.
    /// - Throws: `noEntry` when the kernel holds no such inode (or it was removed).
    func relative(_ inode: UInt64) throws(FUSEError) -> [UInt8] {
        guard let path = inodes.path(inode) else { throw .noEntry }
        return path
    }

    private func relative(_ name: FUSEName, in parent: UInt64) throws(FUSEError) -> [UInt8] {
        let folder = try relative(parent)
        return folder.isEmpty ? name.bytes : folder + [UInt8(ascii: "/")] + name.bytes
    }

    func absolute(_ relative: [UInt8]) -> [UInt8] {
        relative.isEmpty ? Array(backing.utf8) : Array(backing.utf8) + [UInt8(ascii: "/")] + relative
    }

    /// A relative path as the database keys items (UTF-8; a name that is not is no item's).
    private func text(_ relative: [UInt8]) -> String { String(decoding: relative, as: UTF8.self) }

    private func status(_ relative: [UInt8]) throws(FUSEError) -> stat {
        var status = stat()
        guard withBytePath(absolute(relative), { lstat($0, &status) }) == 0 else { throw .lastCall() }
        return status
    }

    private func attributes(_ inode: UInt64, _ status: stat, generation: UInt64) -> FUSEAttributes {
        var attributes = FUSEAttributes(inode: inode, stat: status)
        attributes.generation = generation
        return attributes
    }

    /// The attributes of `inode` now, remembered as what the kernel was told.
    private func answer(_ inode: UInt64, _ status: stat) -> FUSEAttributes {
        attributes(inode, status, generation: inodes.generation(of: inode, seen: ReplicaInodes.Seen(status)))
    }

    /// Makes sure the folder `inode` holds its items on disk before a program looks in it.
    private func populate(_ inode: UInt64, _ relative: [UInt8]) {
        guard !inodes.isPopulated(inode) else { return }
        if fetcher.populateIfDataless(text(relative)) { inodes.setPopulated(inode) }
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
        populate(parent, try relative(parent))
        let path = try relative(name, in: parent)
        let status = try status(path)
        let seen = ReplicaInodes.Seen(status)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, lookups: 1, seen: seen)
        return attributes(inode, status, generation: generation)
    }

    func forget(_ inode: UInt64, lookups: UInt64) { inodes.forget(inode, lookups: lookups) }

    func attributes(of inode: UInt64, descriptor: Int32?, by requester: FUSERequester) throws(FUSEError) -> FUSEAttributes {
        if let descriptor {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { throw .lastCall() }
            return answer(inode, status)
        }
        return answer(inode, try status(try relative(inode)))
    }

    func setAttributes(_ changes: FUSEAttributeChanges, of inode: UInt64, descriptor: Int32?, by requester: FUSERequester)
        throws(FUSEError) -> FUSEAttributes
    {
        let path = try relative(inode)
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
        return try attributes(of: inode, descriptor: descriptor, by: requester)
    }

    func list(_ folder: UInt64, after cookie: UInt64, into sink: inout FUSEListingSink, by requester: FUSERequester)
        throws(FUSEError)
    {
        let path = try relative(folder)
        if cookie == 0 { populate(folder, path) }
        guard let directory = withBytePath(absolute(path), { opendir($0) }) else { throw .lastCall() }
        var names: [[UInt8]] = []
        while let entry = readdir(directory) {
            let name = DirectoryEntry.nameBytes(of: entry)  // never entry.pointee: it reads past the record
            if name != [UInt8(ascii: ".")] && name != [UInt8(ascii: "."), UInt8(ascii: ".")] { names.append(name) }
        }
        closedir(directory)
        // A stable order, so that a listing the kernel asks for in parts goes on where it was.
        names.sort { $0.lexicographicallyPrecedes($1) }
        var index = Int(cookie)
        while index < names.count {
            let name = FUSEName(bytes: names[index])
            let child = path.isEmpty ? names[index] : path + [UInt8(ascii: "/")] + names[index]
            guard let status = try? status(child) else {
                index += 1
                continue
            }
            if sink.countsLookups {
                let (inode, generation) = inodes.inode(names[index], in: folder, lookups: 0, seen: ReplicaInodes.Seen(status))
                guard sink.add(name, attributes(inode, status, generation: generation), cookie: UInt64(index + 1)) else {
                    inodes.forget(inode, lookups: 0)
                    return
                }
                inodes.addLookup(inode)
            } else {
                // Not a lookup: an inode the kernel holds keeps its number, others show the one a
                // lookup would give them.
                let inode = inodes.existing(names[index], in: folder) ?? UInt64(status.st_ino)
                guard sink.add(name, attributes(inode, status, generation: 0), cookie: UInt64(index + 1)) else { return }
            }
            index += 1
        }
    }

    func readLink(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [UInt8] {
        let path = absolute(try relative(inode))
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = withBytePath(path) { readlink($0, &buffer, buffer.count - 1) }
        guard count >= 0 else { throw .lastCall() }
        return buffer[..<count].map { UInt8(bitPattern: $0) }
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
        let path = try relative(inode)
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
        return FUSEOpenFile(descriptor: fd, isComplete: Replica.datalessKey(ofDescriptor: fd) == nil)
    }

    func read(_ inode: UInt64, descriptor: Int32, offset: UInt64, count: Int, by requester: FUSERequester) throws(FUSEError) {
        guard Replica.datalessKey(ofDescriptor: descriptor) != nil else { return }
        let path = text(try relative(inode))
        let start = Int64(clamping: offset)
        let (end, overflow) = start.addingReportingOverflow(Int64(count))
        let wanted = start..<(overflow ? Int64.max : end)
        try admit(requester, to: path, present: fetcher.holds(descriptor: descriptor, range: wanted))
        do { try fetcher.provide(path, descriptor: descriptor, range: wanted, program: requester.processIdentifier) } catch {
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
        return done
    }

    func create(_ name: FUSEName, in parent: UInt64, mode: UInt32, flags: Int32, by requester: FUSERequester)
        throws(FUSEError) -> (FUSEAttributes, FUSEOpenFile)
    {
        populate(parent, try relative(parent))
        let path = absolute(try relative(name, in: parent))
        let fd = withBytePath(path) { Glibc.open($0, flags | O_CREAT | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw .lastCall() }
        var status = stat()
        fstat(fd, &status)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, lookups: 1, seen: ReplicaInodes.Seen(status))
        return (attributes(inode, status, generation: generation), FUSEOpenFile(descriptor: fd, isComplete: true))
    }

    func makeFolder(_ name: FUSEName, in parent: UInt64, mode: UInt32, by requester: FUSERequester) throws(FUSEError)
        -> FUSEAttributes
    {
        populate(parent, try relative(parent))
        let path = try relative(name, in: parent)
        guard withBytePath(absolute(path), { mkdir($0, mode) }) == 0 else { throw .lastCall() }
        let status = try status(path)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, lookups: 1, seen: ReplicaInodes.Seen(status))
        inodes.setPopulated(inode)
        return attributes(inode, status, generation: generation)
    }

    func makeSymbolicLink(_ name: FUSEName, in parent: UInt64, target: [UInt8], by requester: FUSERequester)
        throws(FUSEError) -> FUSEAttributes
    {
        populate(parent, try relative(parent))
        let path = try relative(name, in: parent)
        let result = withBytePath(target) { target in withBytePath(absolute(path)) { symlink(target, $0) } }
        guard result == 0 else { throw .lastCall() }
        let status = try status(path)
        let (inode, generation) = inodes.inode(name.bytes, in: parent, lookups: 1, seen: ReplicaInodes.Seen(status))
        return attributes(inode, status, generation: generation)
    }

    func remove(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) {
        guard withBytePath(absolute(try relative(name, in: parent)), { unlink($0) }) == 0 else { throw .lastCall() }
        inodes.detach(name.bytes, in: parent)
    }

    func removeFolder(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) {
        let path = try relative(name, in: parent)
        // A dataless folder is empty on disk but not in the store: its items are written first,
        // so that removing it removes only what a program saw (ENOTEMPTY when it holds items).
        try populateBeforeRemoval(path)
        guard withBytePath(absolute(path), { rmdir($0) }) == 0 else { throw .lastCall() }
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
        populate(newParent, try relative(newParent))
        let from = try relative(name, in: parent)
        let to = try relative(newName, in: newParent)
        try populateBeforeRemoval(to)
        let result = withBytePath(absolute(from)) { from in
            withBytePath(absolute(to)) { to in
                flags.contains(.noReplace) ? SystemCalls.renameNoReplace(from, to) : Glibc.rename(from, to)
            }
        }
        guard result == 0 else { throw .lastCall() }
        inodes.rename(name.bytes, in: parent, to: newName.bytes, in: newParent)
    }

    func synchronize(_ inode: UInt64, descriptor: Int32, dataOnly: Bool, by requester: FUSERequester) throws(FUSEError) {
        guard (dataOnly ? fdatasync(descriptor) : fsync(descriptor)) == 0 else { throw .lastCall() }
    }

    func release(_ inode: UInt64, descriptor: Int32, flags: Int32) {}

    func statistics(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEVolumeStatistics {
        var result = statvfs()
        guard statvfs(backing, &result) == 0 else { throw .lastCall() }
        return FUSEVolumeStatistics(result)
    }
}

/// Calls `body` with `path` as a NUL-terminated C string.
private func withBytePath<T>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
    try (path + [0]).withUnsafeBufferPointer { bytes in
        try bytes.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
    }
}
