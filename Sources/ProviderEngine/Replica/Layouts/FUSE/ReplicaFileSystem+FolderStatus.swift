import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The status attributes of folders through the mount (``ReplicaFileSystem``): worked out from
/// the database when a program asks, never written on the backing folder (whose change time
/// tells the mount and the local scan that its entries changed).
///
/// The values are the other layouts' (``FolderStatus``): `pinned`, else `dataless` while the
/// folder's items are not written to disk (listing it through the mount does not write them;
/// opening one of its files or `populate` does), else `downloaded`. It describes the folder
/// alone: it does not roll up what lies below it (`fileproviderctl status` and `pending` do). `user.fileprovider.domain` is the domain's name.
/// Each read costs one database row and the policies along the folder's path; nothing else.
extension ReplicaFileSystem {
    /// The status of the folder at `path` (relative; the root's is empty). Blocking.
    func folderStatus(_ path: [UInt8]) -> ReplicaStatus {
        let record = path.isEmpty ? nil : storedItem(path)
        return FolderStatus.of(text(path), record: record, store: fetcher.manager.store, domainID: fetcher.domainID)
    }

    /// The value of the status attribute `name` (``statusName`` or ``domainName``) of the folder
    /// at `path`. Blocking.
    func folderAttribute(_ name: [UInt8], _ path: [UInt8]) -> [UInt8] {
        name == Self.statusName ? Array(folderStatus(path).rawValue.utf8) : Array(fetcher.domain.utf8)
    }

    /// Whether the item of the database `inode` (at `path`) is a folder: from what the kernel
    /// was told of it, else from its record.
    func isStoredFolder(_ inode: UInt64, _ path: [UInt8]) -> Bool {
        if let seen = inodes.seen(of: inode) { return seen.mode & UInt32(S_IFMT) == UInt32(S_IFDIR) }
        return storedItem(path)?.kind == .folder
    }

    /// Whether the backing entry at `path` (absolute) is a folder.
    static func isFolderOnDisk(_ path: [UInt8]) -> Bool {
        var status = stat()
        return withBytePath(path, { lstat($0, &status) }) == 0 && status.st_mode & S_IFMT == S_IFDIR
    }
}
