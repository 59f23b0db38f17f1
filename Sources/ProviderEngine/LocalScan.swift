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

/// Which local names are never uploaded: editors' temporary files, our own files, and a domain's
/// own patterns (`*` and `?` wildcards, matched against the name).
public struct IgnoreRules: Sendable {
    public static let builtIn = ["*.swp", "*.swx", ".#*", "~$*", "*.tmp", "*~", ".fp-tmp-*", ".fileprovider-staging*", ".DS_Store"]
    public var patterns: [String]

    public init(extra: [String] = []) { patterns = Self.builtIn + extra }

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
