import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// What backend programs said to `describe`, kept on disk so that a command that only needs a
/// program's options (`status`, `domain list`, or `sync` before it opens the store) does not
/// start it: `$XDG_CACHE_HOME/fileprovider/backends/NAME.json` (by default
/// `~/.cache/fileprovider/backends`).
///
/// An entry is keyed by the program's path and the identity of the file it names (device,
/// inode, size and modification time, symlinks followed): a program installed again, edited or
/// replaced is described again. Entries are written atomically (a temporary file renamed into
/// place, mode 0600) and read as hostile input: a file that is not a regular file, is over
/// ``maximumEntrySize``, is not the expected JSON or does not match the program is ignored,
/// and what it holds goes through the same checks as a program's own reply.
struct DescriptionCache: Sendable {
    /// The identity of a program's file when it was described.
    struct Key: Codable, Equatable, Sendable {
        var path: String
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64
        var modifiedNanoseconds: Int64
    }

    private struct Entry: Codable {
        var format: Int
        var key: Key
        var description: DescribeResult
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// The largest entry read: 1 MiB (a description of 64 options is far smaller).
    static let maximumEntrySize = 1 << 20
    private static let format = 1

    /// The folder of the entries.
    let folder: String

    /// The cache of this environment (`XDG_CACHE_HOME`, else `HOME`/.cache), or `nil` when
    /// neither is an absolute path.
    init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
            folder = cache + "/fileprovider/backends"
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            folder = home + "/.cache/fileprovider/backends"
        } else {
            return nil
        }
    }

    /// The identity of the file at `path` now, or `nil` when it is not a regular file.
    static func key(of path: String) -> Key? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Key(
            path: path, device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modified: Int64(info.st_mtim.tv_sec), modifiedNanoseconds: Int64(info.st_mtim.tv_nsec))
    }

    private func file(_ kind: String) -> String { folder + "/" + kind + ".json" }

    /// The stored description of the program of `kind` whose file has the identity `key`, or
    /// `nil` when there is none, it is stale or it cannot be read. Blocks on file reads: call
    /// it on a thread of its own.
    func description(kind: String, key: Key) -> DescribeResult? {
        guard ExternalBackends.isValidKind(kind), let data = PrivateFile.read(file(kind), limit: Self.maximumEntrySize),
            let entry = try? JSONDecoder().decode(Entry.self, from: data), entry.format == Self.format, entry.key == key
        else { return nil }
        return entry.description
    }

    /// Stores what the program of `kind` described, for the file identity `key` (taken before
    /// it was started). Failures are ignored: the cache only saves a program start.
    func store(_ description: DescribeResult, kind: String, key: Key) {
        guard ExternalBackends.isValidKind(kind),
            let data = try? Self.encoder.encode(Entry(format: Self.format, key: key, description: description)),
            data.count <= Self.maximumEntrySize
        else { return }
        PrivateFile.write(data, to: file(kind), in: folder)
    }

    /// Forgets what the program of `kind` described (it now fails to describe itself).
    func remove(kind: String) {
        guard ExternalBackends.isValidKind(kind) else { return }
        unlink(file(kind))
    }
}
