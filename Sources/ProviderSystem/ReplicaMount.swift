import CSystemShims
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The replica path of an on-access (`dataless`) domain: a bind mount of the backing folder,
/// where the files really are, marked by a ``PreContentGroup`` so every access through it
/// waits for the group's answer. The engine reads and writes contents only through the backing
/// path (unmarked); programs use the replica path.
///
/// The mount is made so that no program ever reaches it unmarked:
/// 1. a detached copy of the backing folder's mount (`open_tree(OPEN_TREE_CLONE)`) is marked
///    while nobody can reach it, and made unbindable (a recursive bind of a folder above it,
///    as containers and sandboxes make, leaves it out rather than copying it unmarked),
/// 2. the replica folder is bound onto itself and made private (the *anchor*), so the mount
///    attached on it propagates to no other mount namespace (a copy there would be unmarked),
/// 3. the marked copy is attached on the anchor (`move_mount`).
///
/// ``detach()`` (and the guardian, when the owner dies) takes both away with
/// `umount2(MNT_DETACH)`: a program then sees the empty replica folder, never a file's holes.
/// Needs `CAP_SYS_ADMIN`.
public final class ReplicaMount: Sendable {
    /// The folder that holds the files (unmarked).
    public let backing: String
    /// The path programs use.
    public let replica: String
    /// The unique id of the marked mount (`STATX_MNT_ID_UNIQUE`: never given to another mount).
    public let mountID: UInt64
    /// The id of the private anchor under it.
    let anchorID: UInt64

    private init(backing: String, replica: String, mountID: UInt64, anchorID: UInt64) {
        self.backing = backing
        self.replica = replica
        self.mountID = mountID
        self.anchorID = anchorID
    }

    /// Mounts `backing` at `replica`, marked by `group` before any program can reach it.
    /// Leftovers of an owner that died with its guardian (the same mount, still attached) are
    /// detached first. `replica` is created when missing.
    /// - Throws: `invalidArgument` when `replica` is not empty, is a mount point of something
    ///   else, or overlaps `backing`; `noSuchItem` when `backing` is missing;
    ///   `permissionDenied` without `CAP_SYS_ADMIN`; `notSupported` when the file system
    ///   refuses pre-content marks; `localIOFailure` otherwise. Nothing stays mounted on failure.
    public static func attach(backing: String, at replica: String, markedBy group: PreContentGroup) throws(FileProviderError)
        -> ReplicaMount
    {
        let backing = URL(fileURLWithPath: backing).standardizedFileURL.path
        let replica = URL(fileURLWithPath: replica).standardizedFileURL.path
        guard backing != replica, !backing.hasPrefix(replica + "/"), !replica.hasPrefix(backing + "/") else {
            throw FileProviderError(
                .invalidArgument, "the replica folder \(replica) and its backing folder \(backing) overlap; keep them apart")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: backing, isDirectory: &isFolder), isFolder.boolValue else {
            throw FileProviderError(.noSuchItem, "the backing folder \(backing) is missing")
        }
        if !FileManager.default.fileExists(atPath: replica) {
            do {
                try FileManager.default.createDirectory(atPath: replica, withIntermediateDirectories: true)
            } catch {
                throw FileProviderError(.localIOFailure, "cannot create the replica folder \(replica): \(error.localizedDescription)")
            }
        }
        try detachLeftovers(at: replica, backing: backing)
        let entries: [String]
        do { entries = try FileManager.default.contentsOfDirectory(atPath: replica) } catch {
            throw FileProviderError(.localIOFailure, "cannot list the replica folder \(replica): \(error.localizedDescription)")
        }
        guard entries.isEmpty else {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(replica) is not empty (\(entries.count) entries); on-access mode mounts its backing folder there, which would hide them: move them into \(backing) or choose an empty folder"
            )
        }

        let tree = fp_open_tree_clone(backing)
        if tree < 0 { throw mountFailure("cannot copy the mount of", path: backing) }
        defer { Glibc.close(tree) }
        try group.markMount(tree: tree, describedAs: backing)
        if fp_mount_set_unbindable(tree) != 0 { throw mountFailure("cannot make unbindable the mount copy of", path: backing) }
        if fp_mount_private_anchor(replica) != 0 { throw mountFailure("cannot bind onto itself", path: replica) }
        let anchorID: UInt64
        do { anchorID = try identity(of: replica).mountID } catch {
            _ = fp_detach_mount(replica)
            throw error
        }
        if fp_move_mount(tree, replica) != 0 {
            let error = mountFailure("cannot attach the marked mount at", path: replica)
            _ = fp_detach_mount(replica)
            throw error
        }
        let mountID: UInt64
        do { mountID = try identity(of: replica).mountID } catch {
            _ = fp_detach_mount(replica)
            _ = fp_detach_mount(replica)
            throw error
        }
        return ReplicaMount(backing: backing, replica: replica, mountID: mountID, anchorID: anchorID)
    }

    /// Takes the mount and its anchor away (lazily: files open through it stay open, and their
    /// accesses still raise events). Detaching twice, or after the guardian did, is fine.
    /// - Throws: `localIOFailure` when the kernel refuses.
    public func detach() throws(FileProviderError) {
        for id in [mountID, anchorID] {
            guard let top = try? Self.identity(of: replica), top.isMountRoot, top.mountID == id else { continue }
            if fp_detach_mount(replica) != 0 { throw Self.mountFailure("cannot detach the mount at", path: replica) }
        }
    }

    /// Whether the replica path shows this mount now.
    public var isAttached: Bool {
        guard let top = try? Self.identity(of: replica) else { return false }
        return top.isMountRoot && top.mountID == mountID
    }

    /// Whether `path` is the root of a mount.
    public static func isMountPoint(_ path: String) -> Bool {
        (try? identity(of: path).isMountRoot) ?? false
    }

    /// Detaches what an owner that died with its guardian left at `replica`: a bind mount of
    /// `backing` and the anchor under it (the folder bound onto itself). Returns how many mounts
    /// it detached.
    /// - Throws: `invalidArgument` when something else is mounted there (never detached).
    @discardableResult
    public static func detachLeftovers(at replica: String, backing: String) throws(FileProviderError) -> Int {
        var detached = 0
        for _ in 0..<8 {
            guard isMountPoint(replica) else { return detached }
            var top = stat()
            var source = stat()
            guard stat(replica, &top) == 0, stat(backing, &source) == 0 else { break }
            let isBackingBind = top.st_dev == source.st_dev && top.st_ino == source.st_ino
            let isAnchor = entryInode(of: replica).map { top.st_ino == $0 } ?? false
            guard isBackingBind || isAnchor else { break }
            if fp_detach_mount(replica) != 0 { throw mountFailure("cannot detach the leftover mount at", path: replica) }
            detached += 1
        }
        if isMountPoint(replica) {
            throw FileProviderError(
                .invalidArgument,
                "\(replica) is a mount point of something else; on-access mode mounts its backing folder there: unmount it or choose another folder"
            )
        }
        return detached
    }

    /// Detaches the bind mount of `backing` at `replica` (and the anchor under it) when no live
    /// fanotify group of any process marks it: what `serve` and its guardian leave when both die
    /// at once (`systemctl kill -s KILL`, an OOM kill of their cgroup). The kernel drops a
    /// group's marks with the group, and an unmarked mount lets programs read a file's holes as
    /// zeros. A mount a live group marks (a running `serve`, or a guardian that outlived it) is
    /// left; so is an anchor without the bind on it (a `serve` attaching its mount right now)
    /// and anything else mounted there. Returns whether it detached something.
    /// - Throws: `permissionDenied` when the descriptors of some process cannot be read (not
    ///   root), so a live group may exist: nothing is detached; `localIOFailure` when the
    ///   kernel refuses the detach.
    @discardableResult
    public static func detachUnguarded(at replica: String, backing: String) throws(FileProviderError) -> Bool {
        let replica = URL(fileURLWithPath: replica).standardizedFileURL.path
        guard isMountPoint(replica), isBind(of: backing, at: replica), let before = try? identity(of: replica),
            let listed = try? identity(of: replica, unique: false)
        else { return false }
        switch fp_mount_is_guarded(listed.mountID) {
        case 1: return false
        case 0: break
        default:
            throw FileProviderError(
                .permissionDenied,
                "cannot tell whether a live fanotify group guards the replica mount at \(replica): the descriptors of some processes cannot be read (run as root)"
            )
        }
        // Detach only the mount looked at (a serve may have replaced it meanwhile).
        guard let now = try? identity(of: replica), now.isMountRoot, now.mountID == before.mountID else { return false }
        if fp_detach_mount(replica) != 0 { throw mountFailure("cannot detach the unguarded mount at", path: replica) }
        // The anchor under it: the replica folder bound onto itself.
        if isMountPoint(replica), !isBind(of: backing, at: replica), let top = try? identity(of: replica), top.isMountRoot,
            isAnchor(replica)
        {
            _ = fp_detach_mount(replica)
        }
        return true
    }

    // MARK: Helpers

    /// Whether the mount root at `replica` is the folder `backing` (a bind of it).
    private static func isBind(of backing: String, at replica: String) -> Bool {
        var top = stat()
        var source = stat()
        guard stat(replica, &top) == 0, stat(backing, &source) == 0 else { return false }
        return top.st_dev == source.st_dev && top.st_ino == source.st_ino
    }

    /// Whether the mount root at `replica` is the replica folder itself (the anchor).
    private static func isAnchor(_ replica: String) -> Bool {
        var top = stat()
        guard stat(replica, &top) == 0 else { return false }
        return entryInode(of: replica).map { top.st_ino == $0 } ?? false
    }

    /// The mount a path is on and whether it is that mount's root. `unique`: the 64-bit id no
    /// other mount ever gets; else the id mountinfo and fanotify's fdinfo show.
    static func identity(of path: String, unique: Bool = true) throws(FileProviderError) -> (mountID: UInt64, isMountRoot: Bool) {
        var id: UInt64 = 0
        var root: Int32 = 0
        if fp_mount_identity(path, unique ? 1 : 0, &id, &root) != 0 { throw mountFailure("cannot look at the mount of", path: path) }
        return (id, root != 0)
    }

    /// The inode number of the directory entry `path` names in its parent (the folder under any
    /// mount on it: `readdir` shows the entry, not the mount's root).
    private static func entryInode(of path: String) -> UInt64? {
        let parent = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        guard let folder = opendir(parent) else { return nil }
        defer { closedir(folder) }
        while let entry = readdir(folder) {
            if Filename.decode(entry) == name { return DirectoryEntry.inode(of: entry) }
        }
        return nil
    }

    /// The error for a failed mount call.
    private static func mountFailure(_ operation: String, path: String) -> FileProviderError {
        let code = errno
        if code == EPERM {
            return FileProviderError(.permissionDenied, "\(operation) \(path): mounting needs CAP_SYS_ADMIN (run as root)")
        }
        return POSIXError.error(operation, path: path, errno: code)
    }
}
