import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension LocalBackend {
    /// Copies `contents` (nothing for an empty file) into a new staging file in `folder` and
    /// returns the staging file's name; the caller renames it into place or removes it.
    ///
    /// The staging file is locked (`flock`) while the returned handle lives: keep it until the
    /// rename. A staging file nobody holds a lock on was left by a process that died, and
    /// listings remove it once it is old enough (see ``reapStagingFile(_:in:displayPath:)``).
    ///
    /// - Throws: `localIOFailure` when `contents` cannot be read; what writing in `folder`
    ///   throws (`insufficientQuota`, `permissionDenied`); `cancelled`.
    func stage(
        _ contents: URL?, in folder: FileHandleFD, folderPath: LocalPath, modificationDate: Date?,
        flags: FileSystemFlags = .plainFile, cancellation: CancellationFlag, sink: ContentSink? = nil
    ) throws(FileProviderError) -> (name: String, lock: FileHandleFD) {
        let name = LocalPath.stagingName()
        let display = folderPath.appending(name).display
        let output = try folder.createExclusive(name, displayPath: display)
        _ = lockFile(output.fd, 0)
        do {
            if let contents {
                let input = try FileHandleFD.open(path: contents.path, flags: O_RDONLY)
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
                defer { buffer.deallocate() }
                var position: Int64 = 0
                while true {
                    try cancellation.check()
                    let count = try input.read(into: buffer, displayPath: contents.path)
                    if count == 0 { break }
                    let piece = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                    try output.writeAll(piece, displayPath: display)
                    sink?.consume(piece, at: position)
                    position += Int64(count)
                }
            }
            if flags.contains(.userExecutable) {
                // Created 0666 less the umask: x where r is.
                let mode = try output.mode(displayPath: display)
                try output.setMode(mode_t(flags.applied(toMode: UInt32(mode))), displayPath: display)
            }
            if let modificationDate { try output.setModificationDate(modificationDate, displayPath: display) }
        } catch {
            folder.removeQuietly(name)
            throw error
        }
        return (name, output)
    }

    /// Removes a staging file left by an upload that was cut short: a staging name exactly
    /// (``StagingName/matches(_:)``; a user's look-alike file stays), and either a file nobody
    /// holds the lock of, or a symlink untouched for ``StagingName/abandonedAge``. Never a
    /// folder (a recursive deletion renames the folder it deletes to a staging name).
    ///
    /// A writer locks its staging file right after creating it and holds the lock until the
    /// rename, and the kernel drops the lock when the writer dies, so an unlocked file is
    /// abandoned at once: no age is needed, and a store is left clean as soon as its folder is
    /// listed again. (Should a listing slip into the instant between the creation and the lock,
    /// the writer's rename fails and the upload is retried; its source is untouched.) A staged
    /// symlink cannot be locked; it lives for one rename, so the age is ample. Errors are
    /// logged and otherwise ignored: the listing goes on.
    func reapStagingFile(_ name: String, in folder: FileHandleFD, displayPath: String) {
        guard StagingName.matches(name) else { return }
        var info = Glibc.stat()
        guard Glibc.fstatat(folder.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            let fd = Glibc.openat(folder.fd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { return }
            defer { Glibc.close(fd) }
            // Still the same file (not replaced meanwhile), and nobody writing it.
            var opened = Glibc.stat()
            guard Glibc.fstat(fd, &opened) == 0, opened.st_ino == info.st_ino, lockFile(fd, 0) == 0 else { return }
        case S_IFLNK:
            guard StagingName.isAbandoned(name, modified: Int64(info.st_mtim.tv_sec), accessed: Int64(info.st_atim.tv_sec))
            else { return }
        default:
            return
        }
        if Glibc.unlinkat(folder.fd, name, 0) == 0 {
            Self.logger.debug("removed \(TerminalText.quoted(displayPath)), left by an upload that was cut short")
        } else {
            Self.logger.warning(
                "cannot remove \(TerminalText.quoted(displayPath)), left by an upload that was cut short: \(String(cString: strerror(errno))); remove it by hand"
            )
        }
    }

    /// Whether the file `name` in `folder` holds exactly the bytes of `contents`.
    func file(
        _ name: String, in folder: FileHandleFD, displayPath: String, hasContentsOf contents: URL?
    ) throws(FileProviderError) -> Bool {
        let existing = try folder.openFileForReading(name, displayPath: displayPath)
        let existingSize = try existing.stat().st_size
        guard let contents else { return existingSize == 0 }
        let input = try FileHandleFD.open(path: contents.path, flags: O_RDONLY)
        guard try input.stat().st_size == existingSize else { return false }
        let left = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
        let right = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
        defer {
            left.deallocate()
            right.deallocate()
        }
        while true {
            let count = try Self.readFully(input, into: left, displayPath: contents.path)
            let other = try Self.readFully(existing, into: right, displayPath: displayPath)
            if count != other { return false }
            if count == 0 { return true }
            if memcmp(left.baseAddress!, right.baseAddress!, count) != 0 { return false }
        }
    }

    private static func readFully(
        _ file: FileHandleFD, into buffer: UnsafeMutableRawBufferPointer, displayPath: String
    ) throws(FileProviderError) -> Int {
        var total = 0
        while total < buffer.count {
            let count = try file.read(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]), displayPath: displayPath)
            if count == 0 { break }
            total += count
        }
        return total
    }
}

extension String {
    /// Equality of the exact bytes: NFC and NFD spellings of a name are different names on disk.
    func hasSameBytes(as other: String) -> Bool { utf8.elementsEqual(other.utf8) }
}

extension ItemIdentifier {
    func hasSameBytes(as other: ItemIdentifier) -> Bool { rawValue.hasSameBytes(as: other.rawValue) }
}

/// Takes an exclusive open-file-description lock on a whole file without waiting (Linux
/// `F_OFD_SETLK`: held until every descriptor of that open file is closed, so it goes away when
/// its process dies, and other descriptors in the same process do not release it). Returns 0 when
/// locked.
private func lockFile(_ fd: Int32, _: Int32) -> Int32 {
    var lock = Glibc.flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 0
    lock.l_len = 0
    let ofdSetLock: Int32 = 37  // F_OFD_SETLK
    return Glibc.fcntl(fd, ofdSetLock, &lock)
}
