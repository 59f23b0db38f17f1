import Foundation
import ProviderCore
import ProviderSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A ``FUSEFileSystem`` over a local folder (the backing folder), for the tests of
/// ``FUSESession`` and the `fuse-folder-server` fixture: every item of the backing folder shows
/// through the mount. Files added with ``addDataless(_:source:)`` start as sparse files whose
/// bytes are "fetched" from a source file in chunks when a read needs them (the progressive
/// hydrator's part, with an artificial delay), so a test sees whether a program ever reads
/// bytes that were not fetched.
///
/// Inodes: 1 for the root; others are handed out at lookup and kept only while the kernel
/// holds lookups of them (``forget(_:lookups:)`` drops them), so the table stays as small as
/// the kernel's cache: ``Statistics/nodes`` says how large it is.
public final class FolderFileSystem: FUSEFileSystem {
    /// What the tests look at.
    public struct Statistics: Sendable {
        /// Chunks fetched, and their bytes.
        public var fetches = 0
        public var fetchedBytes: UInt64 = 0
        /// The largest read and write request the kernel sent.
        public var largestRead = 0
        public var largestWrite = 0
        /// Read requests.
        public var reads = 0
        /// Inodes known (root included).
        public var nodes = 1
        /// Opens answered as complete (kernel cache kept) and not.
        public var completeOpens = 0
        public var incompleteOpens = 0
        /// Requesters' pids seen (0 excluded), for the requester test.
        public var requesters: Set<Int32> = []
    }

    /// A file whose bytes come from `source`: which chunks are present in the backing file.
    private struct Dataless {
        var source: String
        var size: UInt64
        var present: [Bool]
    }

    private struct Node {
        var parent: UInt64
        var name: [UInt8]
        var lookups: UInt64
        /// Removed or replaced: no path any more (open descriptors still work).
        var detached = false
        /// Raised by ``FolderFileSystem/replacedBehindTheKernel(_:in:)``.
        var generation: UInt64 = 0
    }

    private struct Key: Hashable {
        var parent: UInt64
        var name: [UInt8]
    }

    private struct Table {
        var nodes: [UInt64: Node] = [1: Node(parent: 1, name: [], lookups: 1)]
        var inodes: [Key: UInt64] = [:]
        var next: UInt64 = 2
        /// Dataless files by the backing file's inode number (stable across renames).
        var dataless: [UInt64: Dataless] = [:]
        var statistics = Statistics()
    }

    /// The folder whose items show through the mount.
    public let backing: String
    /// The size of a fetched chunk.
    public let chunkSize: Int
    /// How long each fetch takes (microseconds).
    public let fetchDelay: UInt32
    private let table = Mutex(Table())
    private let fetching = NSLock()
    /// When set, fetches fail (the store is unreachable): reads of missing bytes get EIO.
    public let storeDown = Atomic<Bool>(false)

    public init(backing: String, chunkSize: Int = 64 << 10, fetchDelay: UInt32 = 0) {
        self.backing = backing
        self.chunkSize = chunkSize
        self.fetchDelay = fetchDelay
    }

    public var statistics: Statistics {
        table.withLock { table in
            var result = table.statistics
            result.nodes = table.nodes.count
            return result
        }
    }

    /// Makes `relative` (in the backing folder) a dataless copy of the file `source`: a sparse
    /// file of its size, mode and modification time, whose bytes are fetched on demand.
    /// - Throws: `FUSEError` of the file calls.
    public func addDataless(_ relative: String, source: String) throws(FUSEError) {
        var status = stat()
        guard stat(source, &status) == 0 else { throw .lastCall() }
        let path = backing + "/" + relative
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, status.st_mode & 0o7777)
        guard fd >= 0 else { throw .lastCall() }
        defer { close(fd) }
        guard ftruncate(fd, status.st_size) == 0 else { throw .lastCall() }
        var times = [status.st_atim, status.st_mtim]
        futimens(fd, &times)
        var backingStatus = stat()
        fstat(fd, &backingStatus)
        let chunks = (Int(status.st_size) + chunkSize - 1) / chunkSize
        table.withLock {
            $0.dataless[UInt64(backingStatus.st_ino)] = Dataless(
                source: source, size: UInt64(status.st_size), present: Array(repeating: false, count: chunks))
        }
    }

    /// Whether every byte of `relative` was fetched (or it was never dataless).
    public func isComplete(_ relative: String) -> Bool {
        var status = stat()
        guard stat(backing + "/" + relative, &status) == 0 else { return false }
        return table.withLock { $0.dataless[UInt64(status.st_ino)] == nil }
    }

    // MARK: Names and inodes

    private func path(_ inode: UInt64) throws(FUSEError) -> [UInt8] {
        let found: [UInt8]? = table.withLock { table in
            var parts: [[UInt8]] = []
            var current = inode
            while current != 1 {
                guard let node = table.nodes[current], !node.detached else { return nil }
                parts.append(node.name)
                current = node.parent
            }
            var result = Array(backing.utf8)
            for part in parts.reversed() { result += [UInt8(ascii: "/")] + part }
            return result
        }
        guard let found else { throw .noEntry }
        return found
    }

    private func path(_ name: FUSEName, in parent: UInt64) throws(FUSEError) -> [UInt8] {
        try path(parent) + [UInt8(ascii: "/")] + name.bytes
    }

    /// The inode of `name` in `parent`, made when new; counts `lookups` lookups.
    private func inode(_ name: FUSEName, in parent: UInt64, lookups: UInt64) -> UInt64 {
        table.withLock { table in
            let key = Key(parent: parent, name: name.bytes)
            if let inode = table.inodes[key] {
                table.nodes[inode]?.lookups += lookups
                return inode
            }
            let inode = table.next
            table.next += 1
            table.nodes[inode] = Node(parent: parent, name: name.bytes, lookups: lookups)
            table.inodes[key] = inode
            return inode
        }
    }

    /// Detaches whatever is named `name` in `parent` (removed or replaced).
    private func detach(_ name: FUSEName, in parent: UInt64) {
        table.withLock { table in
            if let inode = table.inodes.removeValue(forKey: Key(parent: parent, name: name.bytes)) {
                table.nodes[inode]?.detached = true
            }
        }
    }

    private func attributes(_ inode: UInt64, _ status: stat) -> FUSEAttributes {
        var attributes = FUSEAttributes(inode: inode, stat: status)
        attributes.generation = table.withLock { $0.nodes[inode]?.generation ?? 0 }
        return attributes
    }

    /// The item `name` in `parent` was replaced in the backing folder (as a sync replaces a
    /// file): its inode gets a new generation, so that the kernel, told with
    /// ``FUSESession/invalidate(entry:in:)``, makes a new inode of it and believes its size
    /// (with the writeback cache the kernel keeps a cached file's size itself). Returns the
    /// inode, or nil when the kernel holds no lookup of the name.
    @discardableResult
    public func replacedBehindTheKernel(_ name: FUSEName, in parent: UInt64) -> UInt64? {
        table.withLock { table in
            guard let inode = table.inodes[Key(parent: parent, name: name.bytes)] else { return nil }
            table.nodes[inode]?.generation += 1
            return inode
        }
    }

    private func status(_ path: [UInt8]) throws(FUSEError) -> stat {
        var status = stat()
        let result = withPath(path) { lstat($0, &status) }
        guard result == 0 else { throw .lastCall() }
        return status
    }

    // MARK: FUSEFileSystem

    public func lookup(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEAttributes {
        note(requester)
        let status = try status(try path(name, in: parent))
        return attributes(inode(name, in: parent, lookups: 1), status)
    }

    public func forget(_ inode: UInt64, lookups: UInt64) {
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

    public func attributes(of inode: UInt64, descriptor: Int32?, by requester: FUSERequester) throws(FUSEError) -> FUSEAttributes {
        if let descriptor {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { throw .lastCall() }
            return attributes(inode, status)
        }
        return attributes(inode, try status(try path(inode)))
    }

    public func setAttributes(
        _ changes: FUSEAttributeChanges, of inode: UInt64, descriptor: Int32?, by requester: FUSERequester
    ) throws(FUSEError) -> FUSEAttributes {
        let path = try path(inode)
        if let size = changes.size {
            try complete(path)
            let result = descriptor.map { ftruncate($0, off_t(size)) } ?? withPath(path) { truncate($0, off_t(size)) }
            guard result == 0 else { throw .lastCall() }
        }
        if let mode = changes.mode {
            let result = descriptor.map { fchmod($0, mode) } ?? withPath(path) { chmod($0, mode) }
            guard result == 0 else { throw .lastCall() }
        }
        if changes.owner != nil || changes.group != nil {
            let owner = changes.owner ?? UInt32.max
            let group = changes.group ?? UInt32.max
            guard withPath(path, { lchown($0, owner, group) }) == 0 else { throw .lastCall() }
        }
        if changes.accessTime != nil || changes.modificationTime != nil {
            func time(_ change: FUSEAttributeChanges.Time?) -> timespec {
                switch change {
                // UTIME_NOW is UTIME_OMIT + 1 in <sys/stat.h> (Glibc's module shows neither).
                case nil: return timespec(tv_sec: 0, tv_nsec: SystemCalls.omitTime)
                case .now: return timespec(tv_sec: 0, tv_nsec: SystemCalls.omitTime + 1)
                case .at(let stamp): return stamp.timespec
                }
            }
            var times = [time(changes.accessTime), time(changes.modificationTime)]
            let result =
                descriptor.map { futimens($0, &times) } ?? withPath(path) { utimensat(AT_FDCWD, $0, &times, AT_SYMLINK_NOFOLLOW) }
            guard result == 0 else { throw .lastCall() }
        }
        return try attributes(of: inode, descriptor: descriptor, by: requester)
    }

    public func list(_ folder: UInt64, after cookie: UInt64, into sink: inout FUSEListingSink, by requester: FUSERequester)
        throws(FUSEError)
    {
        let path = try path(folder)
        guard let directory = withPath(path, { opendir($0) }) else { throw .lastCall() }
        var names: [[UInt8]] = []
        while let entry = readdir(directory) {
            let name = DirectoryEntry.nameBytes(of: entry)
            if name != [UInt8(ascii: ".")] && name != [UInt8(ascii: "."), UInt8(ascii: ".")] { names.append(name) }
        }
        closedir(directory)
        names.sort { $0.lexicographicallyPrecedes($1) }
        var index = Int(cookie)
        while index < names.count {
            let name = FUSEName(bytes: names[index])
            guard let status = try? status(path + [UInt8(ascii: "/")] + names[index]) else {
                index += 1
                continue
            }
            if sink.countsLookups {
                let inode = inode(name, in: folder, lookups: 0)
                guard sink.add(name, attributes(inode, status), cookie: UInt64(index + 1)) else {
                    forget(inode, lookups: 0)
                    return
                }
                table.withLock { $0.nodes[inode]?.lookups += 1 }
            } else {
                let known = table.withLock { $0.inodes[Key(parent: folder, name: name.bytes)] }
                let inode = known ?? (UInt64(status.st_ino) | 1 << 40)
                guard sink.add(name, attributes(inode, status), cookie: UInt64(index + 1)) else { return }
            }
            index += 1
        }
    }

    public func readLink(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [UInt8] {
        let path = try path(inode)
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = withPath(path) { readlink($0, &buffer, buffer.count - 1) }
        guard count >= 0 else { throw .lastCall() }
        return buffer[..<count].map { UInt8(bitPattern: $0) }
    }

    public func open(_ inode: UInt64, flags: Int32, by requester: FUSERequester) throws(FUSEError) -> FUSEOpenFile {
        note(requester)
        let path = try path(inode)
        let writing = flags & O_ACCMODE != O_RDONLY
        if flags & O_TRUNC != 0 {
            forgetDataless(path)
        } else if writing {
            try complete(path)
        }
        let fd = withPath(path) { Glibc.open($0, (flags & ~(O_CREAT | O_EXCL | O_NOCTTY)) | O_CLOEXEC) }
        guard fd >= 0 else { throw .lastCall() }
        let isComplete = dataless(fd) == nil
        table.withLock {
            if isComplete { $0.statistics.completeOpens += 1 } else { $0.statistics.incompleteOpens += 1 }
        }
        return FUSEOpenFile(descriptor: fd, isComplete: isComplete)
    }

    public func read(
        _ inode: UInt64, descriptor: Int32, offset: UInt64, count: Int, by requester: FUSERequester, answer: () -> Void
    ) throws(FUSEError) {
        note(requester)
        table.withLock {
            $0.statistics.largestRead = max($0.statistics.largestRead, count)
            $0.statistics.reads += 1
        }
        try fetch(descriptor, offset: offset, count: UInt64(count))
    }

    public func write(
        _ inode: UInt64, descriptor: Int32, bytes: UnsafeRawBufferPointer, offset: UInt64, by requester: FUSERequester
    ) throws(FUSEError) -> Int {
        table.withLock { $0.statistics.largestWrite = max($0.statistics.largestWrite, bytes.count) }
        // A file open for writing was completed at open; a write through another open of a
        // file still dataless (mmap, writeback) completes it first.
        try fetch(descriptor, offset: 0, count: UInt64.max / 2)
        var done = 0
        while done < bytes.count {
            let written = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            guard written > 0 else { throw .lastCall() }
            done += written
        }
        return done
    }

    public func create(_ name: FUSEName, in parent: UInt64, mode: UInt32, flags: Int32, by requester: FUSERequester)
        throws(FUSEError) -> (FUSEAttributes, FUSEOpenFile)
    {
        let path = try path(name, in: parent)
        let fd = withPath(path) { Glibc.open($0, flags | O_CREAT | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw .lastCall() }
        var status = stat()
        fstat(fd, &status)
        let inode = inode(name, in: parent, lookups: 1)
        return (attributes(inode, status), FUSEOpenFile(descriptor: fd, isComplete: true))
    }

    public func makeFolder(_ name: FUSEName, in parent: UInt64, mode: UInt32, by requester: FUSERequester) throws(FUSEError)
        -> FUSEAttributes
    {
        let path = try path(name, in: parent)
        guard withPath(path, { mkdir($0, mode) }) == 0 else { throw .lastCall() }
        return attributes(inode(name, in: parent, lookups: 1), try status(path))
    }

    public func makeSymbolicLink(_ name: FUSEName, in parent: UInt64, target: [UInt8], by requester: FUSERequester)
        throws(FUSEError) -> FUSEAttributes
    {
        let path = try path(name, in: parent)
        let result = withPath(target) { target in withPath(path) { symlink(target, $0) } }
        guard result == 0 else { throw .lastCall() }
        return attributes(inode(name, in: parent, lookups: 1), try status(path))
    }

    public func remove(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) {
        guard withPath(try path(name, in: parent), { unlink($0) }) == 0 else { throw .lastCall() }
        detach(name, in: parent)
    }

    public func removeFolder(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) {
        guard withPath(try path(name, in: parent), { rmdir($0) }) == 0 else { throw .lastCall() }
        detach(name, in: parent)
    }

    public func rename(
        _ name: FUSEName, in parent: UInt64, to newName: FUSEName, in newParent: UInt64, flags: FUSERenameFlags,
        by requester: FUSERequester
    ) throws(FUSEError) {
        guard flags.subtracting(.noReplace).isEmpty else { throw .invalid }
        let from = try path(name, in: parent)
        let to = try path(newName, in: newParent)
        let result = withPath(from) { from in
            withPath(to) { to in flags.contains(.noReplace) ? SystemCalls.renameNoReplace(from, to) : Glibc.rename(from, to) }
        }
        guard result == 0 else { throw .lastCall() }
        table.withLock { table in
            let old = Key(parent: parent, name: name.bytes)
            let new = Key(parent: newParent, name: newName.bytes)
            if let replaced = table.inodes.removeValue(forKey: new) { table.nodes[replaced]?.detached = true }
            if let moved = table.inodes.removeValue(forKey: old) {
                table.nodes[moved]?.parent = newParent
                table.nodes[moved]?.name = newName.bytes
                table.inodes[new] = moved
            }
        }
    }

    public func synchronize(_ inode: UInt64, descriptor: Int32, dataOnly: Bool, by requester: FUSERequester) throws(FUSEError) {
        guard (dataOnly ? fdatasync(descriptor) : fsync(descriptor)) == 0 else { throw .lastCall() }
    }

    public func release(_ inode: UInt64, descriptor: Int32, flags: Int32) {}

    public func statistics(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEVolumeStatistics {
        var result = statvfs()
        guard statvfs(backing, &result) == 0 else { throw .lastCall() }
        return FUSEVolumeStatistics(result)
    }

    // MARK: Fetching

    private func note(_ requester: FUSERequester) {
        if requester.processIdentifier > 0 {
            table.withLock { _ = $0.statistics.requesters.insert(requester.processIdentifier) }
        }
    }

    private func dataless(_ fd: Int32) -> UInt64? {
        var status = stat()
        guard fstat(fd, &status) == 0 else { return nil }
        let key = UInt64(status.st_ino)
        return table.withLock { $0.dataless[key] == nil ? nil : key }
    }

    /// Fetches every missing chunk of `count` bytes at `offset` of the file open as `fd`.
    private func fetch(_ fd: Int32, offset: UInt64, count: UInt64) throws(FUSEError) {
        guard let key = dataless(fd) else { return }
        // The program's descriptor may be read-only: write through one of our own.
        let writer = Glibc.open("/proc/self/fd/\(fd)", O_WRONLY | O_CLOEXEC)
        guard writer >= 0 else { throw .lastCall() }
        defer { close(writer) }
        while true {
            // One missing chunk at a time, outside the lock (another thread may fetch beside).
            let next: (source: String, chunk: Int, size: UInt64)? = table.withLock { table in
                guard let file = table.dataless[key] else { return nil }
                let end = min(offset &+ count, file.size)
                guard offset < end else { return nil }
                let first = Int(offset / UInt64(chunkSize))
                let last = Int((end - 1) / UInt64(chunkSize))
                guard let chunk = (first...last).first(where: { !file.present[$0] }) else { return nil }
                return (file.source, chunk, file.size)
            }
            guard let next else { return }
            if storeDown.load(ordering: .sequentiallyConsistent) { throw .ioError }
            // One fetch at a time, as over one connection to a store: a reader's pace is the
            // fetch delay's, however many requests the kernel sends at once.
            fetching.lock()
            defer { fetching.unlock() }
            if fetchDelay > 0 { usleep(fetchDelay) }
            let start = UInt64(next.chunk * chunkSize)
            let length = Int(min(UInt64(chunkSize), next.size - start))
            var buffer = [UInt8](repeating: 0, count: length)
            let source = Glibc.open(next.source, O_RDONLY | O_CLOEXEC)
            guard source >= 0 else { throw .ioError }
            let got = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress, length, off_t(start)) }
            close(source)
            guard got == length else { throw .ioError }
            let put = buffer.withUnsafeBytes { pwrite(writer, $0.baseAddress, length, off_t(start)) }
            guard put == length else { throw .lastCall() }
            table.withLock { table in
                guard var file = table.dataless[key] else { return }
                file.present[next.chunk] = true
                table.statistics.fetches += 1
                table.statistics.fetchedBytes += UInt64(length)
                table.dataless[key] = file.present.allSatisfy { $0 } ? nil : file
            }
        }
    }

    /// Fetches every missing byte of the file at `path` (before a change to it).
    private func complete(_ path: [UInt8]) throws(FUSEError) {
        let fd = withPath(path) { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return }
        defer { close(fd) }
        try fetch(fd, offset: 0, count: UInt64.max / 2)
    }

    /// The file at `path` is truncated whole: nothing of it is missing any more.
    private func forgetDataless(_ path: [UInt8]) {
        var status = stat()
        guard withPath(path, { stat($0, &status) }) == 0 else { return }
        _ = table.withLock { $0.dataless.removeValue(forKey: UInt64(status.st_ino)) }
    }
}

/// Calls `body` with `path` as a NUL-terminated C string.
func withPath<T>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
    try (path + [0]).withUnsafeBufferPointer { bytes in
        try bytes.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
    }
}
