import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// What the open-time probe (``WebDAVBackend/serverChecksConditions()``, a `PUT` and maybe a
/// `DELETE` on the user's server) found, kept on disk so that it runs once per collection and
/// user, not at every process start (every `ls`):
/// `$XDG_CACHE_HOME/fileprovider/webdav/<SHA-1 of URL and user>.json` (by default
/// `~/.cache/fileprovider/webdav`). Removing the file makes the next open probe again.
///
/// Entries are written atomically (a temporary file renamed into place, mode 0600) and read as
/// hostile input: a file that is not a regular file, is over ``maximumEntrySize``, is not the
/// expected JSON or names another URL or user is ignored (and the server probed again).
/// Failures to write are ignored: the memory only saves a probe. At most ``maximumEntries``
/// are kept (the least recently written go first).
struct ProbeMemory: Sendable {
    private struct Entry: Codable {
        var format: Int
        var url: String
        var user: String
        var checksConditions: Bool
    }

    static let maximumEntrySize = 16 << 10
    private static let format = 1

    /// The folder of the entries.
    let folder: String

    init(folder: String) { self.folder = folder }

    /// The memory of this environment (`XDG_CACHE_HOME`, else `HOME`/.cache), or `nil` when
    /// neither is an absolute path.
    init?(environment: [String: String]) {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
            folder = cache + "/fileprovider/webdav"
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            folder = home + "/.cache/fileprovider/webdav"
        } else {
            return nil
        }
    }

    /// The file of the entry for `url` and `user`.
    func file(url: String, user: String?) -> String {
        var digest = SHA1Digest()
        Array((url + "\n" + (user ?? "")).utf8).withUnsafeBytes { digest.update($0) }
        return folder + "/" + digest.finishBytes().map { String(format: "%02x", $0) }.joined() + ".json"
    }

    /// What the probe found for `url` and `user`, or `nil` when it was not remembered. Blocks
    /// on a file read: call it off the cooperative pool.
    func recall(url: String, user: String?) -> Bool? {
        guard let data = Self.readRegularFile(file(url: url, user: user), limit: Self.maximumEntrySize),
            let entry = try? JSONDecoder().decode(Entry.self, from: data), entry.format == Self.format, entry.url == url,
            entry.user == (user ?? "")
        else { return nil }
        return entry.checksConditions
    }

    /// Remembers what the probe found for `url` and `user`. Blocks on file writes: call it off
    /// the cooperative pool.
    func remember(_ checksConditions: Bool, url: String, user: String?) {
        let entry = Entry(format: Self.format, url: url, user: user ?? "", checksConditions: checksConditions)
        guard let data = try? JSONEncoder().encode(entry), data.count <= Self.maximumEntrySize else { return }
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            return
        }
        let target = file(url: url, user: user)
        let temporary = target + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let written = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let count = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        close(fd)
        if !written || rename(temporary, target) != 0 { unlink(temporary) }
        prune()
    }

    /// The most entries kept: past it, the least recently written go (a machine that runs the
    /// tests makes one for every collection a test opens).
    static let maximumEntries = 1000

    /// Removes the least recently written entries past ``maximumEntries``.
    private func prune() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder), names.count > Self.maximumEntries
        else { return }
        var entries: [(path: String, written: Int)] = []
        for name in names where name.hasSuffix(".json") {
            let path = folder + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            entries.append((path, info.st_mtim.tv_sec))
        }
        guard entries.count > Self.maximumEntries else { return }
        entries.sort { $0.written < $1.written }
        for entry in entries.prefix(entries.count - Self.maximumEntries) { unlink(entry.path) }
    }

    /// The contents of a regular file (symlinks not followed) of at most `limit` bytes.
    private static func readRegularFile(_ path: String, limit: Int) -> Data? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size >= 0, info.st_size <= limit else { return nil }
        var data = Data(count: limit + 1)
        var total = 0
        while total <= limit {
            let count = data.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, limit + 1 - total) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            total += count
        }
        guard total <= limit else { return nil }
        return data.prefix(total)
    }
}
