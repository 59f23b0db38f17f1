import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Dataless files (the ``DatalessLayout``): a sparse file under the item's real name, with its
/// size and date, marked with the `user.fileprovider.dataless` attribute (the hash of its
/// item's identifier); what the layout, the downloader, the on-access handler and eviction
/// read and write of one. Blocking.
extension Replica {
    /// The extended attribute that makes a file dataless: a format byte and the hash of its
    /// item's identifier (9 bytes, inside any ext4 inode).
    static let datalessAttribute = "user.fileprovider.dataless"
    private static let datalessFormat: UInt8 = 1
    /// The format byte of a dataless file whose fill began (``markFilling(atPath:_:)``).
    private static let fillingFormat: UInt8 = 2

    /// The owner of the dataless file at `path`, or `nil` when it is not one. Blocking.
    static func datalessOwner(atPath path: String) -> PlaceholderOwner? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let length = ExtendedAttribute.get(datalessAttribute, atPath: path, into: &buffer)
        guard let (key, _) = decodeDataless(buffer, length: length) else { return nil }
        return PlaceholderOwner(domain: nil, identifierKey: key)
    }

    /// The identifier key of the dataless file open as `fd`, or `nil` when it is not one.
    /// Blocking.
    static func datalessKey(ofDescriptor fd: Int32) -> UInt64? {
        datalessState(ofDescriptor: fd)?.key
    }

    /// The identifier key of the dataless file open as `fd` and whether a fill of it began
    /// (``markFilling(atPath:)``), or `nil` when it is not a dataless file. Blocking.
    static func datalessState(ofDescriptor fd: Int32) -> (key: UInt64, filling: Bool)? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let length = ExtendedAttribute.get(datalessAttribute, of: fd, into: &buffer)
        return decodeDataless(buffer, length: length)
    }

    /// The identifier key and the filling state in a dataless mark's value (`length` bytes of
    /// `buffer`, as `getxattr` returned it), or `nil` when it is not a dataless mark.
    private static func decodeDataless(_ buffer: [UInt8], length: Int) -> (key: UInt64, filling: Bool)? {
        guard length == 9, buffer[0] == datalessFormat || buffer[0] == fillingFormat else { return nil }
        return ((0..<8).reduce(UInt64(0)) { $0 | UInt64(buffer[1 + $1]) << (8 * UInt64($1)) }, buffer[0] == fillingFormat)
    }

    /// Marks the dataless file at `path` as being filled (or, with `false`, as not), keeping
    /// its item: a fill truncates the file before it writes, and a fill cut short by a crash
    /// leaves a short file that must not pass for one a program emptied (`O_TRUNC`). Blocking.
    /// - Throws: `noSuchItem` when the file is no longer dataless; `localIOFailure`.
    static func markFilling(atPath path: String, _ filling: Bool = true) throws(FileProviderError) {
        var buffer = [UInt8](repeating: 0, count: 16)
        let length = ExtendedAttribute.get(datalessAttribute, atPath: path, into: &buffer)
        guard decodeDataless(buffer, length: length) != nil else {
            throw FileProviderError(.noSuchItem, "\(path) is no longer a dataless file")
        }
        buffer[0] = filling ? fillingFormat : datalessFormat
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { throw POSIXError.error("cannot open", path: path) }
        defer { close(fd) }
        let result = ExtendedAttribute.set(datalessAttribute, to: Array(buffer[..<9]), of: fd)
        _ = try POSIXError.check(result, "cannot mark the fill of", path: path)
    }

    private static func datalessValue(_ identifier: String) -> [UInt8] {
        let key = PlaceholderOwner.key(identifier)
        return [datalessFormat] + (0..<8).map { UInt8(truncatingIfNeeded: key >> (8 * UInt64($0))) }
    }

    /// Creates the dataless file of a new item: a sparse file of the item's size and date,
    /// marked dataless before it gets its name (unnamed first, `O_TMPFILE`, or under a
    /// temporary name where the file system has no unnamed files), so no program and no scan
    /// ever sees it without the mark (an empty file would be taken for contents). An existing
    /// dataless file is rewritten; a file with contents at the name is left alone.
    /// - Throws: `filenameCollision` when a file with contents has the name; `insufficientQuota`
    ///   or `localIOFailure` naming the file when it cannot be written (a size the file system
    ///   cannot hold: `EFBIG`).
    func createDatalessFile(_ relative: String, _ metadata: PlaceholderMetadata) throws(FileProviderError) {
        PoolCheck.note()
        try writeDatalessFile(relative, metadata, replacing: false)
    }

    /// Writes the dataless file of an item at `relative`: a new one, or the existing dataless
    /// file rewritten (its size, date and item). With `replacing`, whatever file is there (a
    /// downloaded one, being evicted) is replaced in one rename; without it, a file with
    /// contents is never touched.
    /// - Throws: as ``createDatalessFile(_:_:)``.
    func writeDatalessFile(_ relative: String, _ metadata: PlaceholderMetadata, replacing: Bool = false) throws(FileProviderError) {
        PoolCheck.note()
        let target = path(relative)
        if !replacing, let print = fingerprint(atPath: target) {
            guard print.isRegularFile, Self.datalessOwner(atPath: target) != nil else {
                throw FileProviderError(.filenameCollision, "\(target) is a file with contents; no dataless file was written over it")
            }
            // Rewritten where it stands (the same inode): a program may have it open and
            // waiting for its contents, which must find the item's new identity there.
            if try Self.rewriteDataless(atPath: target, metadata) { return }
        }
        let folder = target.lastIndex(of: "/").map { String(target[..<$0]) } ?? "."
        var fd = SystemCalls.openUnnamed(inFolder: folder, mode: 0o644)
        let unnamed = fd >= 0
        var temporary: String?
        if !unnamed {
            let name = folder + "/.fp-tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd < 0 { throw POSIXError.error("cannot create dataless file", path: target) }
            _ = flock(fd, LOCK_EX)
            temporary = name
        }
        defer { close(fd) }
        do throws(FileProviderError) {
            try Self.prepareDataless(fd, metadata, path: target)
            if unnamed {
                if SystemCalls.linkUnnamed(fd, to: target) == 0 { return }
                guard errno == EEXIST else { throw POSIXError.error("cannot name dataless file", path: target) }
                // Taken: by a dataless file (an earlier write) or, when replacing, by the file
                // to evict. Named under a temporary name, then renamed over it.
                let name = folder + "/.fp-tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
                _ = flock(fd, LOCK_EX)
                _ = try POSIXError.check(SystemCalls.linkUnnamed(fd, to: name), "cannot name dataless file", path: name)
                temporary = name
            }
            guard let temporary else { return }
            if !replacing, let print = fingerprint(atPath: target), !(print.isRegularFile && Self.datalessOwner(atPath: target) != nil) {
                throw FileProviderError(.filenameCollision, "\(target) is a file with contents; no dataless file was written over it")
            }
            _ = try POSIXError.check(rename(temporary, target), "cannot rename into place", path: target)
        } catch {
            if let temporary { unlink(temporary) }
            throw error
        }
    }

    /// The bytes at the start of a dataless file that hold data (zeros) rather than a hole.
    static let leadingBlock = 4096

    /// Writes zeros over the first ``leadingBlock`` bytes of a dataless file of `size` bytes (at
    /// most its size), so that the file does not look all holes to `lseek(SEEK_DATA)`: a copy
    /// tool that skips holes (`cp` of coreutils) would otherwise copy the file's size in zeros
    /// without reading a byte, and no read means no event to fetch the contents on. With a
    /// data block first, the tool reads it, the read's event fills the whole file, and the
    /// tool's next `SEEK_DATA` finds everything. Costs one block per dataless file. Blocking.
    /// - Throws: `localIOFailure` (`fileWriteOutOfSpace` for a full disk) naming `path`.
    static func writeLeadingBlock(_ fd: Int32, size: Int64, path: String) throws(FileProviderError) {
        try writeZeros(fd, 0..<min(max(0, size), Int64(leadingBlock)), path: path, "cannot write the first block of dataless file")
    }

    /// Makes the open dataless file `fd` of `size` bytes hold no contents again: every block
    /// punched out, then the leading block of zeros written (``writeLeadingBlock(_:size:path:)``).
    /// Its size stays. Blocking.
    /// - Throws: `localIOFailure` naming `path` when the blocks cannot be given back or written.
    static func punchContents(_ fd: Int32, size: Int64, path: String) throws(FileProviderError) {
        if size > 0 {
            _ = try POSIXError.check(
                SystemCalls.punchHole(fd, offset: 0, length: off_t(size)), "cannot give back the blocks of", path: path)
        }
        try writeLeadingBlock(fd, size: size, path: path)
    }

    /// Writes zeros over `range` (a few KiB) of the open file `fd`. Blocking.
    /// - Throws: `localIOFailure` (`fileWriteOutOfSpace` for a full disk): `failure` and `path`.
    static func writeZeros(_ fd: Int32, _ range: Range<Int64>, path: String, _ failure: String) throws(FileProviderError) {
        let count = Int(range.count)
        guard count > 0 else { return }
        let zeros = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, count - done, off_t(range.lowerBound) + off_t(done)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw POSIXError.localWriteError(failure, path: path)
            }
            done += written
        }
    }

    /// Whether every byte of `range` of the open file `fd` is data, not a hole
    /// (`lseek(SEEK_DATA)`/`SEEK_HOLE`): bytes a fetch wrote and nothing punched out since.
    /// Blocking.
    static func holdsData(descriptor fd: Int32, _ range: Range<Int64>) -> Bool {
        guard !range.isEmpty else { return true }
        let data = lseek(fd, off_t(range.lowerBound), SystemCalls.seekData)
        guard data == off_t(range.lowerBound) else { return false }
        let hole = lseek(fd, off_t(range.lowerBound), SystemCalls.seekHole)
        return hole >= off_t(range.upperBound)
    }

    /// The ranges of `ranges` that the file at `path` holds as data (``holdsData(descriptor:_:)``),
    /// with one open of the file; none when it cannot be opened. Blocking.
    static func rangesHoldingData(atPath path: String, _ ranges: [Range<Int64>]) -> [Range<Int64>] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        return ranges.filter { holdsData(descriptor: fd, $0) }
    }

    /// Gives the existing dataless file at `path` the item's identity, size and date in place.
    /// Returns `false` when the file is no longer dataless once opened (filled meanwhile: left
    /// alone). Blocking.
    /// - Throws: `localIOFailure` naming the file when it cannot be written.
    private static func rewriteDataless(atPath path: String, _ metadata: PlaceholderMetadata) throws(FileProviderError) -> Bool {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { throw POSIXError.error("cannot open dataless file", path: path) }
        defer { close(fd) }
        guard datalessState(ofDescriptor: fd) != nil else { return false }
        let size = metadata.kind == ItemKind.file.rawValue ? max(0, metadata.size) : 0
        var status = stat()
        if fstat(fd, &status) == 0, Int64(status.st_size) != size {
            _ = try POSIXError.check(ftruncate(fd, off_t(size)), "cannot size dataless file", path: path)
            try writeLeadingBlock(fd, size: size, path: path)
        }
        try prepareDataless(fd, metadata, path: path, sized: true)
        return true
    }

    /// Gives the open file `fd` the item's size (sparse), date, executable bit and the
    /// dataless mark. `sized`: the file has its size and first block already.
    private static func prepareDataless(_ fd: Int32, _ metadata: PlaceholderMetadata, path: String, sized: Bool = false)
        throws(FileProviderError)
    {
        let size = metadata.kind == ItemKind.file.rawValue ? max(0, metadata.size) : 0
        if !sized {
            _ = try POSIXError.check(ftruncate(fd, off_t(size)), "cannot size dataless file", path: path)
            try writeLeadingBlock(fd, size: size, path: path)
        }
        if let seconds = metadata.contentModificationDate {
            let whole = seconds.rounded(.down)
            var times = [
                timespec(tv_sec: 0, tv_nsec: SystemCalls.omitTime),
                timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9)),
            ]
            _ = try POSIXError.check(futimens(fd, &times), "cannot date dataless file", path: path)
        }
        // The store's executable bit: a new file (0666 less the umask) gets x where r is only
        // when executable; a rewritten one (`sized`) follows the item either way.
        let executable = metadata.executable == true
        if executable || sized {
            var status = stat()
            _ = try POSIXError.check(fstat(fd, &status), "cannot read the mode of dataless file", path: path)
            let flags: FileSystemFlags = executable ? [.userExecutable] : []
            let current = UInt32(status.st_mode & 0o7777)
            let wanted = flags.applied(toMode: current)
            if wanted != current {
                _ = try POSIXError.check(fchmod(fd, mode_t(wanted)), "cannot set the mode of dataless file", path: path)
            }
        }
        let value = datalessValue(metadata.identifier)
        let result = ExtendedAttribute.set(datalessAttribute, to: value, of: fd)
        _ = try POSIXError.check(result, "cannot mark dataless file (the file system needs extended attributes)", path: path)
    }
}
