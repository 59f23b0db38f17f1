import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Small files a process keeps for itself in a cache folder (what an external program
/// described, what a WebDAV server's probe found): written whole or not at all, readable by
/// their owner only, read back only when they are regular files of a bounded size. Blocking.
public enum PrivateFile {
    /// The contents of the regular file at `path` (symlinks not followed) of at most `limit`
    /// bytes; `nil` when there is none, it is something else, or it is larger.
    public static func read(_ path: String, limit: Int) -> Data? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size >= 0, info.st_size <= limit else { return nil }
        var data = Data(count: limit + 1)
        var total = 0
        while total <= limit {
            let count = data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + total, limit + 1 - total) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            total += count
        }
        guard total <= limit else { return nil }
        return data.prefix(total)
    }

    /// Writes `data` to `path` in `folder` (made, mode 0700, when missing) through a temporary
    /// file of mode 0600 renamed over it: a reader finds the old file or the new one. Returns
    /// whether it was written; a failure leaves nothing behind.
    @discardableResult
    public static func write(_ data: Data, to path: String, in folder: String) -> Bool {
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            return false
        }
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        let written = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let count = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        close(fd)
        if written && rename(temporary, path) == 0 { return true }
        unlink(temporary)
        return false
    }
}
