import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// An open file descriptor, closed when the handle goes away.
///
/// Every libc call of the adapter goes through this file: the rest of the adapter never sees a
/// raw return code.
final class FileHandleFD: @unchecked Sendable {
    let fd: Int32

    init(_ fd: Int32) { self.fd = fd }

    deinit { Glibc.close(fd) }

    /// Opens `name` inside this folder as a folder, never following a symlink.
    func openFolder(_ name: String, displayPath: String) throws(FileProviderError) -> FileHandleFD {
        let fd = Glibc.openat(self.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd == -1 {
            let code = errno
            // A symlink where a folder was expected: the folder does not exist, as far as we go.
            if code == ELOOP || code == ENOTDIR {
                throw FileProviderError(.noSuchItem, "\(displayPath) is not a folder")
            }
            throw POSIXError.error("open", path: displayPath, errno: code)
        }
        return FileHandleFD(fd)
    }

    /// Opens `name` inside this folder for reading, never following a symlink.
    func openFileForReading(_ name: String, displayPath: String) throws(FileProviderError) -> FileHandleFD {
        let fd = Glibc.openat(self.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        if fd == -1 {
            let code = errno
            if code == ELOOP {
                throw FileProviderError(.invalidArgument, "\(displayPath) is a symlink; it has no contents to fetch")
            }
            throw POSIXError.error("open", path: displayPath, errno: code)
        }
        return FileHandleFD(fd)
    }

    /// Creates a new file `name` in this folder; fails when it exists.
    func createExclusive(_ name: String, mode: mode_t = 0o644, displayPath: String) throws(FileProviderError)
        -> FileHandleFD
    {
        let fd = Glibc.openat(self.fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        if fd == -1 { throw POSIXError.error("create", path: displayPath) }
        return FileHandleFD(fd)
    }

    /// The status of `name` inside this folder, not following a symlink; `nil` when it does not exist.
    func statEntry(_ name: String, displayPath: @autoclosure () -> String) throws(FileProviderError) -> Glibc.stat? {
        var info = Glibc.stat()
        if Glibc.fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == -1 {
            let code = errno
            if code == ENOENT { return nil }
            throw POSIXError.error("stat", path: displayPath(), errno: code)
        }
        return info
    }

    /// The status of this descriptor.
    func stat() throws(FileProviderError) -> Glibc.stat {
        var info = Glibc.stat()
        if Glibc.fstat(fd, &info) == -1 { throw POSIXError.error("stat", path: "descriptor \(fd)") }
        return info
    }

    /// The target of the symlink `name` in this folder, as raw text.
    func readLink(_ name: String, displayPath: String) throws(FileProviderError) -> String {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBufferPointer { pointer in
            pointer.withMemoryRebound(to: CChar.self) { Glibc.readlinkat(fd, name, $0.baseAddress!, $0.count) }
        }
        if count == -1 { throw POSIXError.error("readlink", path: displayPath) }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    /// The raw names in this folder, without `.` and `..`.
    func entryNames(displayPath: String) throws(FileProviderError) -> [[UInt8]] {
        var names: [[UInt8]] = []
        try forEachEntry(displayPath: displayPath) { name, _ in names.append(name) }
        return names
    }

    /// Calls `body` with the raw name and the `d_type` of each entry of this folder but `.` and
    /// `..`, read from a duplicate of the descriptor from the start.
    func forEachEntry(displayPath: String, _ body: ([UInt8], Int32) -> Void) throws(FileProviderError) {
        let copy = Glibc.dup(fd)
        if copy == -1 { throw POSIXError.error("dup", path: displayPath) }
        guard let dir = Glibc.fdopendir(copy) else {
            let error = POSIXError.error("opendir", path: displayPath)
            Glibc.close(copy)
            throw error
        }
        defer { Glibc.closedir(dir) }
        Glibc.rewinddir(dir)
        while true {
            errno = 0
            guard let entry = Glibc.readdir(dir) else {
                if errno != 0 { throw POSIXError.error("readdir", path: displayPath) }
                break
            }
            let name: [UInt8]? = DirectoryEntry.withName(of: entry) { bytes in
                // "." and "..", without making arrays to compare with.
                if bytes.first == 0x2E && (bytes.count == 1 || (bytes.count == 2 && bytes[1] == 0x2E)) { return nil }
                return Array(bytes)
            }
            if let name { body(name, DirectoryEntry.type(of: entry)) }
        }
    }

    /// Creates the folder `name` inside this folder.
    func makeFolder(_ name: String, displayPath: String) throws(FileProviderError) {
        if Glibc.mkdirat(fd, name, 0o755) == -1 { throw POSIXError.error("mkdir", path: displayPath) }
    }

    /// Creates the symlink `name` pointing at `target` inside this folder.
    func makeSymlink(_ name: String, target: String, displayPath: String) throws(FileProviderError) {
        if Glibc.symlinkat(target, fd, name) == -1 { throw POSIXError.error("symlink", path: displayPath) }
    }

    /// Removes the file or symlink (or, with `folder`, the empty folder) `name` inside this folder.
    func remove(_ name: String, folder: Bool, displayPath: String) throws(FileProviderError) {
        if Glibc.unlinkat(fd, name, folder ? AT_REMOVEDIR : 0) == -1 {
            throw POSIXError.error("remove", path: displayPath)
        }
    }

    /// Removes `name` without reporting failure (for cleaning up staging files).
    func removeQuietly(_ name: String) {
        _ = Glibc.unlinkat(fd, name, 0)
    }

    /// Sets the modification date of `name` inside this folder, not following a symlink.
    func setModificationDate(_ date: Date, of name: String, displayPath: String) throws(FileProviderError) {
        var times = [timespec(tv_sec: 0, tv_nsec: utimeOmit), timespec(date)]
        if Glibc.utimensat(fd, name, &times, AT_SYMLINK_NOFOLLOW) == -1 {
            throw POSIXError.error("set the date of", path: displayPath)
        }
    }

    /// Sets the permission bits of the entry `name` in this folder (never through a symlink:
    /// the caller knows it is a file).
    /// - Throws: `localIOFailure` (`noSuchItem` when it is gone) naming `displayPath`.
    func setMode(_ mode: mode_t, of name: String, displayPath: String) throws(FileProviderError) {
        if Glibc.fchmodat(fd, name, mode & 0o7777, 0) == -1 { throw POSIXError.error("set the mode of", path: displayPath) }
    }

    /// Sets the permission bits of this open file.
    /// - Throws: `localIOFailure` naming `displayPath`.
    func setMode(_ mode: mode_t, displayPath: String) throws(FileProviderError) {
        if Glibc.fchmod(fd, mode & 0o7777) == -1 { throw POSIXError.error("set the mode of", path: displayPath) }
    }

    /// The permission bits of this open file.
    /// - Throws: `localIOFailure` naming `displayPath`.
    func mode(displayPath: String) throws(FileProviderError) -> mode_t {
        var info = Glibc.stat()
        if Glibc.fstat(fd, &info) == -1 { throw POSIXError.error("read the status of", path: displayPath) }
        return info.st_mode & 0o7777
    }

    /// Sets the modification date of this open file.
    func setModificationDate(_ date: Date, displayPath: String) throws(FileProviderError) {
        var times = [timespec(tv_sec: 0, tv_nsec: utimeOmit), timespec(date)]
        if Glibc.futimens(fd, &times) == -1 { throw POSIXError.error("set the date of", path: displayPath) }
    }

    /// Reads up to `count` bytes into `buffer`; 0 at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, displayPath: String) throws(FileProviderError) -> Int {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno == EINTR { continue }
            throw POSIXError.error("read", path: displayPath)
        }
    }

    /// Writes all of `bytes`.
    func writeAll(_ bytes: UnsafeRawBufferPointer, displayPath: String) throws(FileProviderError) {
        var done = 0
        while done < bytes.count {
            let count = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if count < 0 {
                if errno == EINTR { continue }
                let error = POSIXError.error("write", path: displayPath)
                // A destination that cannot be written is a local failure, whatever errno says.
                throw error.code == .insufficientQuota ? error : FileProviderError(.localIOFailure, error.message)
            }
            done += count
        }
    }

    /// Reads up to `buffer.count` bytes at `offset` (`pread`), without moving the position; 0
    /// at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, displayPath: String) throws(FileProviderError)
        -> Int
    {
        while true {
            let count = Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if count >= 0 { return count }
            if errno == EINTR { continue }
            throw POSIXError.error("read", path: displayPath)
        }
    }

    /// Writes all of `bytes` at `offset` (`pwrite`), without moving the position.
    func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64, displayPath: String) throws(FileProviderError) {
        var done = 0
        while done < bytes.count {
            let count = Glibc.pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if count < 0 {
                if errno == EINTR { continue }
                let error = POSIXError.error("write", path: displayPath)
                throw error.code == .insufficientQuota ? error : FileProviderError(.localIOFailure, error.message)
            }
            done += count
        }
    }

    /// Moves the read/write position to `offset` from the start.
    func seek(to offset: Int64, displayPath: String) throws(FileProviderError) {
        if Glibc.lseek(fd, off_t(offset), SEEK_SET) == -1 { throw POSIXError.error("seek", path: displayPath) }
    }

    /// Cuts the file to `length` bytes.
    func truncate(to length: Int64, displayPath: String) throws(FileProviderError) {
        if Glibc.ftruncate(fd, off_t(length)) == -1 { throw POSIXError.error("truncate", path: displayPath) }
    }

    /// Opens a path outside the store (the engine's own files); follows symlinks as usual.
    static func open(path: String, flags: Int32, mode: mode_t = 0o644) throws(FileProviderError) -> FileHandleFD {
        let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
        if fd == -1 {
            // The engine's own file: any failure but a full disk is a local I/O failure.
            let error = POSIXError.error("open", path: path)
            throw error.code == .insufficientQuota ? error : FileProviderError(.localIOFailure, error.message)
        }
        return FileHandleFD(fd)
    }
}

/// `UTIME_OMIT` from `<sys/stat.h>`, which Swift does not import.
private let utimeOmit = (1 << 30) - 2

/// Renames between folders, with `RENAME_NOREPLACE` where the system has it.
enum Rename {
    private typealias RenameAt2 =
        @convention(c) (
            Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32
        ) -> Int32

    private static let renameat2: RenameAt2? = {
        guard let symbol = dlsym(nil, "renameat2") else { return nil }
        return unsafeBitCast(symbol, to: RenameAt2.self)
    }()

    /// Renames, replacing whatever is at the destination (atomically).
    static func replacing(
        from source: FileHandleFD, _ sourceName: String, to destination: FileHandleFD, _ destinationName: String,
        displayPath: String
    ) throws(FileProviderError) {
        if Glibc.renameat(source.fd, sourceName, destination.fd, destinationName) == -1 {
            let code = errno
            if code == EINVAL {
                throw FileProviderError(.invalidArgument, "cannot move \(displayPath) into itself")
            }
            throw POSIXError.error("rename", path: displayPath, errno: code)
        }
    }

    /// Renames, failing with `filenameCollision` when the destination exists.
    static func noReplace(
        from source: FileHandleFD, _ sourceName: String, to destination: FileHandleFD, _ destinationName: String,
        displayPath: String
    ) throws(FileProviderError) {
        if let renameat2 {
            if renameat2(source.fd, sourceName, destination.fd, destinationName, 1) == 0 { return }
            let code = errno
            // EINVAL: the file system lacks the flag, or a folder would move into itself; the
            // fallback below tells them apart.
            if code != EINVAL && code != ENOSYS {
                throw POSIXError.error("rename", path: displayPath, errno: code)
            }
        }
        // Fallback for file systems without RENAME_NOREPLACE: check, then rename (racy).
        if try destination.statEntry(destinationName, displayPath: displayPath) != nil {
            throw FileProviderError(.filenameCollision, "\(displayPath) already exists")
        }
        try replacing(from: source, sourceName, to: destination, destinationName, displayPath: displayPath)
    }
}

extension timespec {
    init(_ date: Date) {
        let interval = date.timeIntervalSince1970
        var seconds = interval.rounded(.down)
        var nanoseconds = ((interval - seconds) * 1_000_000_000).rounded()
        if nanoseconds >= 1_000_000_000 {
            seconds += 1
            nanoseconds -= 1_000_000_000
        }
        self.init(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds))
    }

    var date: Date { Date(timeIntervalSince1970: Double(tv_sec) + Double(tv_nsec) / 1_000_000_000) }

    var nanoseconds: Int64 { Int64(tv_sec) &* 1_000_000_000 &+ Int64(tv_nsec) }
}

extension FileHandleFD {
    /// Removes the folder `name` inside this folder with everything in it, never following a
    /// symlink. Works on raw names, so entries whose names are not UTF-8 go too.
    func removeTree(_ name: [UInt8], displayPath: String) throws(FileProviderError) {
        let cName = name + [0]
        let result: Result<Void, FileProviderError> = cName.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { pointer in
                let path = pointer.baseAddress!
                let fd = Glibc.openat(self.fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if fd == -1 {
                    // Not a folder (or a symlink): remove the entry itself.
                    if errno == ENOTDIR || errno == ELOOP {
                        if Glibc.unlinkat(self.fd, path, 0) == -1 {
                            return .failure(POSIXError.error("remove", path: displayPath))
                        }
                        return .success(())
                    }
                    return .failure(POSIXError.error("open", path: displayPath))
                }
                let folder = FileHandleFD(fd)
                do throws(FileProviderError) {
                    for entry in try folder.entryNames(displayPath: displayPath) {
                        try folder.removeTree(entry, displayPath: displayPath + "/" + String(decoding: entry, as: UTF8.self))
                    }
                } catch {
                    return .failure(error)
                }
                if Glibc.unlinkat(self.fd, path, AT_REMOVEDIR) == -1 {
                    return .failure(POSIXError.error("remove", path: displayPath))
                }
                return .success(())
            }
        }
        try result.get()
    }
}

/// Copies byte ranges from one open file to another: `copy_file_range` (the kernel moves the
/// bytes, or shares them where the file system can), else `pread`/`pwrite` through one 1 MiB
/// buffer made on first use and kept for the copier's life, so the files of a batch share it.
struct Copier {
    private final class Buffer {
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: LocalBackend.chunkSize, alignment: 16)
        deinit { bytes.deallocate() }
    }

    private typealias CopyFileRange =
        @convention(c) (
            Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32
        ) -> Int

    /// glibc's `copy_file_range`, which Swift's Glibc module does not import.
    private static let copyFileRange: CopyFileRange? = {
        guard let symbol = dlsym(nil, "copy_file_range") else { return nil }
        return unsafeBitCast(symbol, to: CopyFileRange.self)
    }()

    private var buffer: Buffer?
    /// Cleared after the kernel could not copy once: the files of a batch are alike.
    private var kernelCopies = true

    /// Copies bytes `range` of `source` to the same offsets of `output`, in steps of at most
    /// 1 MiB, reporting the position after each; stops early at the end of `source`. Returns
    /// the position reached. With a `sink` (the engine hashes the bytes) every byte passes
    /// through the buffer and goes to the sink too: the kernel's copy would not show them.
    /// - Throws: what reading `source` throws (as `POSIXError.error`); `fileWriteOutOfSpace`
    ///   when the disk holding `output` is full, `localIOFailure` when it cannot be written for
    ///   another reason; `cancelled` once `cancellation` is set.
    mutating func copy(
        from source: FileHandleFD, to output: FileHandleFD, range: Range<Int64>, sourcePath: String, destinationPath: String,
        cancellation: CancellationFlag, sink: ContentSink? = nil, progress: (Int64) -> Void
    ) throws(FileProviderError) -> Int64 {
        var offset = range.lowerBound
        while offset < range.upperBound {
            try cancellation.check()
            let wanted = Int(min(Int64(LocalBackend.chunkSize), range.upperBound - offset))
            var count = -1
            if kernelCopies && sink == nil {
                var from = off_t(offset)
                var to = off_t(offset)
                count = Self.copyFileRange.map { $0(source.fd, &from, output.fd, &to, wanted, 0) } ?? -1
                if Self.copyFileRange == nil {
                    kernelCopies = false
                } else if count < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    if code == ENOSPC || code == EDQUOT {
                        throw POSIXError.localWriteError("write", path: destinationPath, errno: code)
                    }
                    // Not between these files (other file systems, an old kernel) or another
                    // failure: plain reads and writes go on, and tell which side failed.
                    kernelCopies = false
                }
            }
            if count < 0 {
                let storage = buffer ?? Buffer()
                buffer = storage
                let chunk = UnsafeMutableRawBufferPointer(rebasing: storage.bytes[0..<wanted])
                count = try source.read(into: chunk, at: offset, displayPath: sourcePath)
                if count > 0 {
                    let written = UnsafeRawBufferPointer(rebasing: chunk[0..<count])
                    try LocalBackend.writingDestination { () throws(FileProviderError) in
                        try output.writeAll(written, at: offset, displayPath: destinationPath)
                    }
                    sink?.consume(written, at: offset)
                }
            }
            if count == 0 { break }
            offset += Int64(count)
            progress(offset)
        }
        return offset
    }
}

/// A raw inotify event: the watch, the mask and the child's name bytes (empty for an event
/// about the watched folder itself).
struct RawInotifyEvent {
    var watch: Int32
    var mask: UInt32
    var name: [UInt8]

    func has(_ flag: Int32) -> Bool { mask & UInt32(bitPattern: flag) != 0 }
}

/// An inotify descriptor (non-blocking) with a wake-up pipe, for the change feed's thread.
///
/// ``wait()`` blocks in `poll(2)` and runs only on the feed's own thread; everything else
/// reads without blocking.
final class InotifyFD: @unchecked Sendable {
    /// Why ``addWatch(_:)`` failed.
    enum WatchFailure: Error {
        /// The folder is gone, or is no longer a folder (a race with the store's users).
        case gone
        /// The kernel's limit `fs.inotify.max_user_watches` is reached.
        case limitReached
        /// Another reason, in words.
        case other(String)
    }

    private let fd: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    /// - Throws: `localIOFailure` when the kernel refuses (too many inotify instances).
    init() throws(FileProviderError) {
        fd = inotify_init1(Int32(O_CLOEXEC | O_NONBLOCK))
        if fd < 0 { throw POSIXError.error("cannot start inotify for", path: "the local store") }
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) != 0 {
            let error = POSIXError.error("cannot create the wake-up pipe for", path: "inotify")
            Glibc.close(fd)
            throw error
        }
        wakeRead = ends[0]
        wakeWrite = ends[1]
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
    }

    deinit {
        Glibc.close(fd)
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    /// Watches the folder open as `folder` (through `/proc/self/fd`, so exactly that folder,
    /// whatever its path has become); returns the watch descriptor, the same one for a folder
    /// watched already.
    func addWatch(_ folder: FileHandleFD, mask: UInt32) -> Result<Int32, WatchFailure> {
        let watch = inotify_add_watch(fd, "/proc/self/fd/\(folder.fd)", mask | UInt32(IN_ONLYDIR))
        if watch >= 0 { return .success(watch) }
        switch errno {
        case ENOSPC: return .failure(.limitReached)
        case ENOENT, ENOTDIR: return .failure(.gone)
        case let code: return .failure(.other(String(cString: strerror(code))))
        }
    }

    /// Stops a watch; one the kernel dropped already is fine.
    func removeWatch(_ watch: Int32) { _ = inotify_rm_watch(fd, watch) }

    /// Waits until events are queued or ``wake()`` is called. Blocking: only the feed's thread.
    func wait() {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while poll(&fds, 2, -1) < 0 && errno == EINTR {}
        if fds[1].revents != 0 {
            var drain = [UInt8](repeating: 0, count: 64)
            while Glibc.read(wakeRead, &drain, drain.count) > 0 {}
        }
    }

    /// Makes a waiting (or the next) ``wait()`` return. Any thread.
    func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite, &byte, 1)
    }

    /// The events queued now, without waiting; `nil` when reading fails.
    func drain() -> [RawInotifyEvent]? {
        var events: [RawInotifyEvent] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN ? events : nil
            }
            if count == 0 { return events }
            Self.parse(buffer, count: count, into: &events)
        }
    }

    /// Splits a buffer of `struct inotify_event` records.
    private static func parse(_ buffer: [UInt8], count: Int, into events: inout [RawInotifyEvent]) {
        let header = 16
        buffer.withUnsafeBytes { raw in
            var offset = 0
            while offset + header <= count {
                let watch = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                var name: [UInt8] = []
                if length > 0, offset + header + length <= count {
                    let bytes = raw[(offset + header)..<(offset + header + length)]
                    name = Array(bytes[bytes.startIndex..<(bytes.firstIndex(of: 0) ?? bytes.endIndex)])
                }
                events.append(RawInotifyEvent(watch: watch, mask: mask, name: name))
                offset += header + length
            }
        }
    }
}

extension FileHandleFD {
    /// The names of the folders directly inside this folder (by the entry's type; `lstat` when
    /// the file system does not say), never symlinks.
    func subfolderNames(displayPath: String) throws(FileProviderError) -> [[UInt8]] {
        var names: [[UInt8]] = []
        try forEachEntry(displayPath: displayPath) { name, type in
            guard type == Int32(DT_DIR) || type == Int32(DT_UNKNOWN) else { return }
            if type == Int32(DT_UNKNOWN) {
                var info = Glibc.stat()
                let isFolder = (name + [0]).withUnsafeBufferPointer { pointer in
                    pointer.withMemoryRebound(to: CChar.self) {
                        Glibc.fstatat(fd, $0.baseAddress!, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_mode & S_IFMT == S_IFDIR
                    }
                }
                if !isFolder { return }
            }
            names.append(name)
        }
        return names
    }
}
