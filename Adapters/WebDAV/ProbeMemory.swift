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
        guard let data = PrivateFile.read(file(url: url, user: user), limit: Self.maximumEntrySize),
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
        PrivateFile.write(data, to: file(url: url, user: user), in: folder)
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
}
