import Foundation
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// A change someone made in the replica folder, found by comparing it with the database.
enum LocalChange: Sendable {
    /// A new file or folder at a path the database does not know.
    case created(path: String, kind: ItemKind, fingerprint: FileFingerprint)
    /// The contents of a materialized file changed.
    case modified(record: ItemRecord, fingerprint: FileFingerprint)
    /// The executable bit of a materialized file changed (a local `chmod`), not its contents:
    /// found only where the store keeps the bit (`BackendCapabilities.supportsFileSystemFlags`).
    case flagsChanged(record: ItemRecord, fingerprint: FileFingerprint)
    /// A real file was written at the real name of an item that is not downloaded (beside or
    /// instead of its placeholder). Its writer never saw the item's contents, so it is not an
    /// edit of them: both are kept.
    case writtenOverPlaceholder(record: ItemRecord, fingerprint: FileFingerprint)
    /// An item moved or was renamed (recognised by inode, or by a placeholder's identifier).
    case moved(record: ItemRecord, to: String, fingerprint: FileFingerprint?)
    /// An item is gone from the replica.
    case deleted(record: ItemRecord)

    var path: String {
        switch self {
        case .created(let path, _, _): return path
        case .modified(let record, _), .flagsChanged(let record, _), .writtenOverPlaceholder(let record, _), .deleted(let record):
            return record.path
        case .moved(_, let to, _): return to
        }
    }

    var isDeletion: Bool {
        if case .deleted = self { return true }
        return false
    }
}

/// Which local names are never uploaded: our own files, the default list of editors' temporary,
/// swap and lock files and git's lock files, and a domain's own patterns (`*`, `?` and `[...]`
/// wildcards, matched against the name). A domain's pattern `!PATTERN` takes `PATTERN` off the
/// default list (our own files stay ignored).
public struct IgnoreRules: Sendable {
    /// Our own files: never uploaded, whatever a domain's patterns say.
    public static let own = [".fp-tmp-*", ".fileprovider-staging*"]
    /// Names never uploaded unless a domain's `!PATTERN` takes one off: editors' swap, backup and
    /// lock files (vim, emacs, kate, LibreOffice, Microsoft Office), temporary files, macOS's
    /// folder settings, and the lock files git makes beside its `.git` files while it rewrites
    /// them (`index.lock` and the like: uploaded, a concurrent git elsewhere would see the
    /// repository locked).
    public static let defaults = [
        "*.swp", "*.swx", ".*.sw[a-p]", "*.kate-swp", ".#*", "~$*", ".~lock.*#", "*.tmp", "*~", ".DS_Store",
        "index.lock", "HEAD.lock", "ORIG_HEAD.lock", "FETCH_HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock",
        gitLocks,
    ]
    /// The default rule for every `*.lock` file inside a folder named `.git`, at any depth (git's
    /// ref locks, `.git/refs/heads/main.lock`): the one rule that looks at the folder too
    /// (``ignores(_:inFolder:)``).
    public static let gitLocks = ".git/**/*.lock"
    /// ``own`` and ``defaults``.
    public static let builtIn = own + defaults
    public var patterns: [String]

    /// The built-in patterns, without the defaults that `extra`'s `!PATTERN` entries take off,
    /// and `extra`'s other patterns.
    public init(extra: [String] = []) {
        let removed = Set(extra.filter { $0.hasPrefix("!") }.map { String($0.dropFirst()) })
        patterns = Self.own + Self.defaults.filter { !removed.contains($0) } + extra.filter { !$0.hasPrefix("!") }
    }

    /// Whether `name`, in the folder at the relative path `folder`, is never uploaded: what
    /// ``ignores(_:)`` says, or a `*.lock` file inside a `.git` folder (``gitLocks``, unless the
    /// domain took it off).
    public func ignores(_ name: String, inFolder folder: String) -> Bool {
        if ignores(name) { return true }
        return name.hasSuffix(".lock") && patterns.contains(Self.gitLocks) && folder.split(separator: "/").contains(".git")
    }

    /// Whether the name `name` is never uploaded, wherever it is.
    public func ignores(_ name: String) -> Bool {
        if name.hasSuffix(Replica.placeholderSuffix) { return true }
        return patterns.contains { fnmatch($0, name, 0) == 0 }
    }
}

/// What a scan of the replica found.
struct LocalScanResult {
    static func occupied(_ folders: [String]) -> LocalScanResult {
        LocalScanResult(changes: [], unsettled: [], strayPlaceholders: [], evicted: [], occupiedDataless: folders)
    }

    /// Changes to send to the store.
    var changes: [LocalChange]
    /// Files still being written, left for a later scan.
    var unsettled: [String]
    /// Placeholder files (relative paths of the items they stand for) that no item owns: a
    /// copy of another item's placeholder, or one left beside a real file that took over its
    /// item. They hold no contents, and nothing else would ever remove them.
    var strayPlaceholders: [String]
    /// Materialized items whose file is gone and whose own placeholder stands in its place: an
    /// eviction that has not been recorded yet (still running in another process, or cut short
    /// by a crash). Not a deletion.
    var evicted: [ItemRecord]
    /// Dataless folders that hold something in the replica (made there before the folder was
    /// populated): they must be populated before their contents can be compared.
    var occupiedDataless: [String]
    /// The engine's own downloads that were placed but not recorded (by another process still
    /// recording them, or one killed before it could): recorded, never sent.
    var placed: [PlacedFile] = []
    /// A folder changed while the scan walked the replica, and the scan would delete an item or
    /// remove a placeholder: what it read of different folders may not fit together (a file
    /// moved from a folder not read yet into one already read looks deleted), so its deletions
    /// and removals must wait for a scan the replica holds still for.
    var replicaChangedDuringScan = false
    /// How many folders of the replica the scan read and compared with their records.
    var foldersRead = 0
    /// The scan found more of some kind of change than it holds at once
    /// (``ScanFindings/defaultLimit``): these are what it could act on safely, and a scan after
    /// they were sent finds the rest.
    var isPartial = false
}

/// A file the engine downloaded into the replica (its ``DownloadMark`` matches) that the
/// database does not record as it is.
struct PlacedFile {
    var record: ItemRecord
    var download: PlacedDownload
}
