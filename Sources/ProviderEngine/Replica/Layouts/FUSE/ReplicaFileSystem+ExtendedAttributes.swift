import Foundation
import ProviderCore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Extended attributes through the mount: the backing file's, with the engine's own kept to
/// itself. Nothing here reads contents or fetches; reading never populates a folder (an item of
/// a dataless folder has only the status attributes of a dataless file), setting or removing
/// one populates the item's folder first.
///
/// - `user.fileprovider.status` and `user.fileprovider.domain` (``ReplicaStatus``) show what the
///   backing file carries; a dataless file, which carries none (absent means dataless), shows
///   `dataless` and the domain's name, so a program reading the replica path sees the states
///   the backing folder has. A folder shows the status worked out from the database
///   (``folderStatus(_:)``).
/// - The engine's private marks (`user.fileprovider.dataless`, `user.fileprovider.download`,
///   the replica root's `user.fileprovider.replica`, any other `user.fileprovider.*`) never
///   show: reading one answers ENODATA, listing leaves it out.
/// - Setting or removing any `user.fileprovider.*` attribute is refused with EPERM: the engine
///   owns that namespace (the status is read-only by convention, the marks are its state).
/// - `security.*` and `system.*` (SELinux labels, file capabilities, POSIX ACLs) are not kept:
///   get, set and remove answer EOPNOTSUPP at once (no lookup, no backing file, no database),
///   and listing leaves them out. The kernel enforces none of them on this mount (no
///   `FUSE_POSIX_ACL`; an SELinux policy labels a FUSE mount as a whole), and answering
///   "not supported" rather than "none" is what makes `ls -l` stop asking: it asks
///   `security.selinux` and `system.posix_acl_access` of every file it lists until one says the
///   file system keeps none (then never again on that mount), which was two requests per file,
///   and the kernel asks `security.capability` before every write.
/// - Every other attribute (a user's own `user.*`, `trusted.*` for root) passes through to the
///   backing file: get, list, set with its flags, remove, with the backing file system's
///   errors (ENOTSUP where it keeps none).
extension ReplicaFileSystem {
    /// The namespace the engine owns.
    static let enginePrefix = Array(ReplicaStatus.attributePrefix.utf8)
    static let statusName = Array(ReplicaStatus.attribute.utf8)
    static let domainName = Array(ReplicaStatus.domainAttribute.utf8)
    /// The namespaces the mount keeps nothing of.
    static let unkeptPrefixes = [Array("security.".utf8), Array("system.".utf8)]

    /// Whether `name` is of a namespace the mount keeps nothing of (``unkeptPrefixes``).
    static func isUnkept(_ name: [UInt8]) -> Bool { unkeptPrefixes.contains { name.starts(with: $0) } }

    func extendedAttribute(_ name: FUSEName, of inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [UInt8] {
        if Self.isUnkept(name.bytes) { throw .notSupported }
        guard let place = inodes.place(inode) else { throw .noEntry }
        if place.inDatabase {
            // No database read. An attribute of another namespace (a user's own) is answered as
            // the backing file system answers for a file without it: EOPNOTSUPP where it keeps
            // none of that kind, else ENODATA.
            if !name.bytes.starts(with: Self.enginePrefix) {
                do {
                    _ = try ExtendedAttribute.value(name.bytes, atPath: Array(backing.utf8))
                } catch  where error.code == ENOTSUP || error.code == EOPNOTSUPP {
                    throw FUSEError(code: error.code)
                } catch {}
                throw .noAttribute
            }
            guard name.bytes == Self.statusName || name.bytes == Self.domainName else { throw .noAttribute }
            if isStoredFolder(inode, place.path) { return folderAttribute(name.bytes, place.path) }
            // A file's row, read for its status: downloaded by another process, its backing
            // file answers (below).
            guard let record = storedItem(place.path) else { throw .noEntry }
            guard record.kind == .file else { throw .noAttribute }
            if !isWrittenBehind(record, at: place.path, in: place.parent) {
                return name.bytes == Self.statusName ? Array(ReplicaStatus.dataless.rawValue.utf8) : Array(fetcher.domain.utf8)
            }
        }
        let path = absolute(place.path)
        guard name.bytes.starts(with: Self.enginePrefix) else {
            return try passed { () throws(ExtendedAttribute.Failure) in
                try ExtendedAttribute.value(name.bytes, atPath: path)
            }
        }
        guard name.bytes == Self.statusName || name.bytes == Self.domainName else { throw .noAttribute }
        if Self.isFolderOnDisk(path) { return folderAttribute(name.bytes, place.path) }
        do {
            return try ExtendedAttribute.value(name.bytes, atPath: path)
        } catch  where error.code == ENODATA {
            // None written: a dataless file (absent means dataless).
            guard isDataless(path) else { throw .noAttribute }
            return name.bytes == Self.statusName ? Array(ReplicaStatus.dataless.rawValue.utf8) : Array(fetcher.domain.utf8)
        } catch {
            throw FUSEError(code: error.code)
        }
    }

    func extendedAttributeNames(of inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [FUSEName] {
        guard let place = inodes.place(inode) else { throw .noEntry }
        if place.inDatabase {
            let shows = try isStoredFolder(inode, place.path) ? true : isStoredFile(inode, place.path)
            return shows ? [FUSEName(bytes: Self.statusName), FUSEName(bytes: Self.domainName)] : []
        }
        let path = absolute(place.path)
        let names = try passed { () throws(ExtendedAttribute.Failure) in try ExtendedAttribute.names(atPath: path) }
        var shown = names.filter {
            !Self.isUnkept($0) && (!$0.starts(with: Self.enginePrefix) || $0 == Self.statusName || $0 == Self.domainName)
        }
        if Self.isFolderOnDisk(path) {
            // Worked out, never on the backing folder (ReplicaFileSystem+FolderStatus.swift).
            shown = shown.filter { $0 != Self.statusName && $0 != Self.domainName } + [Self.statusName, Self.domainName]
        } else if !names.contains(Self.statusName), isDataless(path) {
            shown.append(Self.statusName)
            if !names.contains(Self.domainName) { shown.append(Self.domainName) }
        }
        return shown.map { FUSEName(bytes: $0) }
    }

    func setExtendedAttribute(
        _ name: FUSEName, to value: UnsafeRawBufferPointer, flags: FUSEAttributeFlags, of inode: UInt64, by requester: FUSERequester
    ) throws(FUSEError) {
        if Self.isUnkept(name.bytes) { throw .notSupported }
        guard !name.bytes.starts(with: Self.enginePrefix) else { throw .notPermitted }
        let path = absolute(try onDisk(inode))
        try passed { () throws(ExtendedAttribute.Failure) in
            try ExtendedAttribute.set(name.bytes, to: value, atPath: path, flags: flags.rawValue)
        }
    }

    func removeExtendedAttribute(_ name: FUSEName, of inode: UInt64, by requester: FUSERequester) throws(FUSEError) {
        if Self.isUnkept(name.bytes) { throw .notSupported }
        guard !name.bytes.starts(with: Self.enginePrefix) else { throw .notPermitted }
        let path = absolute(try onDisk(inode))
        try passed { () throws(ExtendedAttribute.Failure) in try ExtendedAttribute.remove(name.bytes, atPath: path) }
    }

    /// Whether the item of the database `inode` (at `path`) is a file: from what the kernel was
    /// told of it, else from its record.
    /// - Throws: `noEntry` when the database has no item there.
    private func isStoredFile(_ inode: UInt64, _ path: [UInt8]) throws(FUSEError) -> Bool {
        if let seen = inodes.seen(of: inode) { return seen.mode & UInt32(S_IFMT) == UInt32(S_IFREG) }
        guard let record = storedItem(path) else { throw .noEntry }
        return record.kind == .file
    }

    /// Whether the backing file at `path` is a dataless file (it has the dataless mark).
    private func isDataless(_ path: [UInt8]) -> Bool {
        Replica.datalessOwner(atPath: String(decoding: path, as: UTF8.self)) != nil
    }

    /// What `body` returns, its failure as the program's call fails.
    private func passed<T>(_ body: () throws(ExtendedAttribute.Failure) -> T) throws(FUSEError) -> T {
        do { return try body() } catch { throw FUSEError(code: error.code) }
    }
}
