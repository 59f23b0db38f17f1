import AdapterKit
import CLibSSH2
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A local file the adapter reads uploads from or writes downloads to, closed by ``close()``
/// or else in `deinit`.
///
/// The positioned reads and writes (`pread`/`pwrite`) may be used by several threads at once.
final class LocalFile: @unchecked Sendable {
    let fd: Int32
    let path: String
    /// Where the bytes written, and those read at an offset, also go (the engine's
    /// ``ContentSink``); set before the file is shared between threads.
    var sink: ContentSink?
    /// Guards ``isClosed``.
    private let lock = NSLock()
    private var isClosed = false

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close() }

    /// Closes the file now (once; later calls do nothing). Call it when the operation is done
    /// with an engine file written in place, before returning: helpers on other connections'
    /// threads hold the file until their tasks are torn down, which may be after the operation
    /// returned, and a descriptor open for writing then made the engine's completion of the file
    /// fail (it takes a read lease, which any writer refuses) while a program waited for it.
    /// Only once no thread writes to it any more.
    func close() {
        lock.lock()
        defer { lock.unlock() }
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }

    /// Opens a file for reading.
    /// - Throws: `localIOFailure` naming the path.
    static func openForReading(_ path: String) throws(FileProviderError) -> LocalFile {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if fd == -1 { throw localError("open", path) }
        return LocalFile(fd: fd, path: path)
    }

    /// Opens the engine's destination file for writing, truncated to `offset` bytes and
    /// positioned there.
    ///
    /// A file that already has that size is not truncated: on ext4 a truncation to 0 makes the
    /// last `close` start writing back the whole file (the `auto_da_alloc` heuristic), which
    /// cost a quarter of a second per GiB in the download's own thread.
    /// - Throws: `localIOFailure` naming the path.
    static func openDestination(_ path: String, keeping offset: Int64) throws(FileProviderError) -> LocalFile {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        if fd == -1 { throw localError("open", path) }
        let file = LocalFile(fd: fd, path: path)
        if try file.size() != offset, ftruncate(fd, off_t(offset)) == -1 { throw localError("truncate", path) }
        if lseek(fd, off_t(offset), SEEK_SET) == -1 { throw localError("seek in", path) }
        return file
    }

    /// Opens the engine's existing file for positioned writes, neither creating nor truncating
    /// it (ranged reads write into it at their offsets); every piece written also goes to
    /// `sink`, if given.
    /// - Throws: `localIOFailure` naming the path.
    static func openForWritingInPlace(_ path: String, sink: ContentSink? = nil) throws(FileProviderError) -> LocalFile {
        let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        if fd == -1 { throw localError("open", path) }
        let file = LocalFile(fd: fd, path: path)
        file.sink = sink
        return file
    }

    /// The size of the open file.
    func size() throws(FileProviderError) -> Int64 {
        var info = stat()
        if fstat(fd, &info) == -1 { throw Self.localError("stat", path) }
        return Int64(info.st_size)
    }

    /// Reads until `buffer` is full or the file ends, at `offset` (`pread`) or else from the
    /// current position; returns the bytes read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64? = nil) throws(FileProviderError) -> Int {
        var total = 0
        while total < buffer.count {
            let start = buffer.baseAddress!.advanced(by: total)
            let left = buffer.count - total
            let count = offset.map { pread(fd, start, left, off_t($0) + off_t(total)) } ?? Glibc.read(fd, start, left)
            if count == -1 {
                if errno == EINTR { continue }
                throw Self.localError("read", path)
            }
            if count == 0 { break }
            total += count
        }
        if let sink, let offset, total > 0 { sink.consume(UnsafeRawBufferPointer(rebasing: buffer[0..<total]), at: offset) }
        return total
    }

    /// Writes all of `buffer` at `offset`.
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) throws(FileProviderError) {
        var done = 0
        while done < buffer.count {
            let count = pwrite(fd, buffer.baseAddress!.advanced(by: done), buffer.count - done, off_t(offset) + off_t(done))
            if count == -1 {
                if errno == EINTR { continue }
                throw Self.localError("write", path)
            }
            done += count
        }
        sink?.consume(buffer, at: offset)
    }

    /// Cuts the file to `size` bytes.
    func truncate(to size: Int64) throws(FileProviderError) {
        if ftruncate(fd, off_t(size)) == -1 { throw Self.localError("truncate", path) }
    }

    // MARK: The prefix a ranged download recorded (``PrefixRecord``)

    /// Records `prefix` on the file; `false` when the file system keeps no extended attributes.
    func recordPrefix(_ prefix: Int64) -> Bool { PrefixRecord.record(prefix, descriptor: fd) }

    /// Removes the recorded prefix (nothing happens when there is none).
    func forgetPrefix() { PrefixRecord.forget(descriptor: fd) }

    /// Local failures are `localIOFailure` whatever the errno, the store is not at fault; but
    /// a full local disk is `fileWriteOutOfSpace`, so the engine can give space back.
    private static func localError(_ operation: String, _ path: String) -> FileProviderError {
        POSIXError.localWriteError(operation, path: path)
    }
}
