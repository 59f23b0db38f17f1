import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The two folders of one conversion of a domain's replica mode
/// (``ProviderManager/convertDomain(named:to:onAccess:events:)``): checked before anything changes,
/// prepared (the marker written, the destination made and marked), and finished once the new
/// mode is recorded. Blocking; the manager runs each step on its executor.
struct ConversionFolders: Sendable {
    let manager: ProviderManager
    let domain: DomainRecord
    /// The layout the domain is converted to.
    let layout: any ReplicaLayout
    /// The domain's replica folder and its backing folder (where a dataless domain keeps its files).
    let replica: URL
    let backing: URL
    /// The conversion's marker (``ConversionMarker``).
    let markerPath: String

    /// Checks that the domain can be converted to ``layout``, changing nothing: a layout that
    /// keeps the files in the backing folder needs it apart from every other folder and empty,
    /// and one guarded on access needs the system to watch accesses there.
    /// - Throws: as ``ProviderManager/convertDomain(named:to:onAccess:events:)``.
    func check() throws(FileProviderError) {
        guard layout.keepsFilesInBackingFolder else { return }
        if ProviderManager.overlaps(replica.path, backing.path) {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(replica.path) and the backing folder \(backing.path) (where a dataless domain keeps its files) are the same or inside one another; a dataless domain's replica folder must be outside \(backing.deletingLastPathComponent().path)"
            )
        }
        for other in try manager.store.domains() where other.name != domain.name {
            var theirs = [(other.replicaPath, "replica")]
            if let theirBacking = try? manager.backingURL(of: other) { theirs.append((theirBacking.path, "backing folder")) }
            for (folder, kind) in theirs where ProviderManager.overlaps(backing.path, folder) {
                throw FileProviderError(
                    .invalidArgument, "the backing folder \(backing.path) would overlap the \(kind) of domain '\(other.name)'")
            }
        }
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: backing.path), !contents.isEmpty {
            throw FileProviderError(
                .invalidArgument,
                "the backing folder \(backing.path) is not empty (files kept when a domain of that name was removed?); move them away and run this command again"
            )
        }
        if layout.isGuardedOnAccess, let problem = OnAccessSupport.problem(forBacking: backing) {
            throw FileProviderError(
                .notSupported, problem.replacingOccurrences(of: OnAccessSupport.instead, with: "keep the domain in placeholder-files mode"))
        }
    }

    /// Writes the conversion's marker and makes its destination: the folder, marked as the
    /// domain's replica root. Checks that both folders are on one file system and that a
    /// replica folder that is to hold the files is no mount point.
    /// - Throws: as ``ProviderManager/convertDomain(named:to:onAccess:events:)``.
    func prepare() throws(FileProviderError) {
        // A FUSE mount whose serve died before fusermount3 removed it (every access: ENOTCONN).
        if !layout.keepsFilesInBackingFolder {
            _ = FUSEMountCheck.detachDeadMount(at: replica.path, subtype: FUSEMountOptions(name: domain.name).subtype)
        }
        if !layout.keepsFilesInBackingFolder && ReplicaMount.isMountPoint(replica.path) {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(replica.path) is still a mount point (left by a 'serve' that was killed?); unmount it with 'umount \(replica.path)' (the files are safe in \(backing.path)) and run this command again"
            )
        }
        do {
            try FileManager.default.createDirectory(at: backing.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: replica, withIntermediateDirectories: true)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot create the folders of domain '\(domain.name)': \(error.localizedDescription)")
        }
        let apart = [backing.path, backing.deletingLastPathComponent().path].first { FileManager.default.fileExists(atPath: $0) }
        if let apart, !BytePaths.sameFileSystem(apart, replica.path) {
            throw FileProviderError(
                .notSupported,
                "the replica folder \(replica.path) and the backing folder \(backing.path) are on different file systems; a conversion moves the files by renaming them (so the database still knows them as they are) and cannot move them between file systems. Send the local changes with 'fileproviderctl sync \(domain.name)', then remove the domain and add it again in the other mode with a replica folder on the file system of \(manager.home.path)"
            )
        }
        try ConversionMarker.write(layout.mode, atPath: markerPath)
        if layout.keepsFilesInBackingFolder {
            try manager.makeFolders(replica: replica, backing: backing, domain: domain.name)
        } else {
            Replica(root: replica, staging: replica).markRoot(domain: domain.name)
        }
    }

    /// The last step of a conversion, after the new mode is recorded: a replica folder emptied
    /// for a layout that keeps the files in the backing folder loses its root mark, and the
    /// marker goes.
    /// - Throws: `localIOFailure` when the marker cannot be removed.
    func finish() throws(FileProviderError) {
        if layout.keepsFilesInBackingFolder { Self.removeRootMark(replica.path) }
        try Replica(root: replica, staging: replica).removeFile(atPath: markerPath)
    }

    /// Removes the mark of a replica root (``Replica/markRoot(domain:)``) from a folder.
    private static func removeRootMark(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        ExtendedAttribute.remove(Replica.rootAttribute, of: fd)
        Glibc.close(fd)
    }
}
