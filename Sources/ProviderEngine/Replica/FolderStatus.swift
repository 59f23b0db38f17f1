import Foundation
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// The status attributes of a replica folder (``ReplicaStatus``; Docs/CLI.md, "Status
/// attributes"): the same values in every layout.
///
/// A folder is ``ReplicaStatus/pinned`` when its content policy (its own, else its folders')
/// is `eager`, else ``ReplicaStatus/dataless`` while its items are not written to disk
/// (``ItemRecord/isDataless``), else ``ReplicaStatus/downloaded`` (its items are written; each
/// of its files says its own state). It describes the folder alone, never what lies below it.
///
/// Where the layout says so (``ReplicaLayout/writesFolderStatus``: `placeholder-files` and the
/// fanotify layout) the engine writes them on the folder itself when its state changes: made
/// (a sync down, a population), populated, pinned or unpinned (the folders below it too), moved
/// by the store into a pinned folder or out of one (the folders below it too: ``StatusRefresher``),
/// made here and sent. Each value is written only when it differs, so a folder that keeps its state
/// is not touched: a write moves the folder's change time, which `tar` compares and which the
/// local scan reads (a folder changed during a scan that would delete makes it start again).
/// The engine's own writes are no local change: `serve`'s watcher takes no attribute change of
/// a folder for one (a folder's mode, dates and attributes are not sent to the store). The FUSE
/// layout's mount works them out from the database when a program asks instead
/// (`ReplicaFileSystem+FolderStatus.swift`).
enum FolderStatus {
    /// The status of a folder that is `dataless` (not populated) and whose content policy is
    /// `policy` (`nil`: unknown, as `lazy`).
    static func of(dataless: Bool, policy: ContentPolicy?) -> ReplicaStatus {
        let status = ReplicaStatus.downloaded(policy: policy)
        return status == .downloaded && dataless ? .dataless : status
    }

    /// The status of the folder at `path` whose record is `record` (`nil`: the root, which may
    /// have none), its policy read along its path. Blocking.
    static func of(_ path: String, record: ItemRecord?, store: MetadataStore, domainID: Int64) -> ReplicaStatus {
        let resolver = try? PolicyResolver.read(from: store, domainID: domainID, along: path)
        return of(dataless: record?.isDataless == true, policy: resolver?.effective(path, own: record?.contentPolicy).policy)
    }

    /// Writes `status` and the domain's name on the folder at `relative` of `replica`, each only
    /// when it differs, when the layout writes folders' status and a folder (not a symlink) is
    /// there. Blocking.
    static func write(_ status: ReplicaStatus, on relative: String, in replica: Replica, domain: String) {
        guard replica.layout.writesFolderStatus else { return }
        let path = replica.path(relative)
        var found = stat()
        guard lstat(path, &found) == 0, found.st_mode & S_IFMT == S_IFDIR else { return }
        status.write(atPath: path, domain: domain)
    }

    /// Writes `status` and the domain's name on the folder the engine just made at `relative`,
    /// without reading them first (no program has seen it: two system calls fewer per folder of
    /// a first sync), when the layout writes folders' status. Blocking.
    static func stamp(_ status: ReplicaStatus, on relative: String, in replica: Replica, domain: String) {
        guard replica.layout.writesFolderStatus else { return }
        status.stamp(atPath: replica.path(relative), domain: domain)
    }

    /// Writes the status of the folder `record` (its policy read along its path) on it, as
    /// ``write(_:on:in:domain:)``. Blocking.
    static func write(_ record: ItemRecord, in replica: Replica, domain: String, store: MetadataStore, domainID: Int64) {
        guard replica.layout.writesFolderStatus, record.kind == .folder else { return }
        write(of(record.path, record: record, store: store, domainID: domainID), on: record.path, in: replica, domain: domain)
    }
}
