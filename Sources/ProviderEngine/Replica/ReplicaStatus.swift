import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The state of a replica file as every program can read it, without our CLI: the extended
/// attribute `user.fileprovider.status` (`getfattr -n user.fileprovider.status FILE`), with the
/// domain's name in `user.fileprovider.domain`. A stable interface (Docs/CLI.md, "Status
/// attributes"); read-only by convention: the engine writes them as states change and a value
/// a program writes is overwritten at the next change.
///
/// A folder's status is ``FolderStatus``'s (`pinned`, `dataless`, `downloaded`). A file's is
/// written on the file that stands for the item: the `.placeholder` file of
/// `placeholder-files` mode, a partly fetched file, the downloaded file. Not on a dataless file
/// of the `dataless` layout: beside its dataless mark an ext4 inode of 256 bytes has no room
/// for them, and each would cost a 4 KiB attribute block; there an absent status means
/// `dataless` (the file has the dataless mark), and the FUSE layout's mount shows `dataless`
/// for it (``ReplicaFileSystem``). A dataless file whose fetch failed says ``error``. A value is written only when it differs
/// from the one there, so a file that keeps its state is not touched. Writing never fails an
/// operation: where the file system keeps no extended attributes the status is absent.
public enum ReplicaStatus: String, Sendable, CaseIterable {
    /// Not downloaded: a dataless file, a `.placeholder` file.
    case dataless
    /// Partly downloaded (progressive hydration): some bytes present.
    case partial
    /// Downloaded, evictable.
    case downloaded
    /// Downloaded and kept so (content policy `eager`): never evicted.
    case pinned
    /// Changed here, not in the store yet: a local edit or a new file waiting to be sent.
    case unsent
    /// A conflicted copy kept beside the item (both versions were edited).
    case conflict
    /// Its last upload failed, or its last download (a `materialize`, a program's read through
    /// an on-access layout) failed on the store's side or the disk's (``marksFailedFetch(_:)``):
    /// `fileproviderctl why` says why; the next sync or read tries again. On a dataless file
    /// too (a fetch that failed leaves it dataless): it costs that one file an attribute block
    /// where its inode has no room, and a later fetch that succeeds replaces it.
    case error

    /// The attribute holding the status.
    public static let attribute = "user.fileprovider.status"
    /// The attribute holding the domain's name.
    public static let domainAttribute = "user.fileprovider.domain"
    /// What the names of the engine's attributes start with (status, domain, the marks of
    /// dataless files and downloads).
    static let attributePrefix = "user.fileprovider."

    /// Writes the status and the domain's name on the file at `path` (never following a final
    /// symlink), each only when it differs. Blocking.
    public func write(atPath path: String, domain: String) {
        write(
            domain: domain, set: { ExtendedAttribute.set($0, to: $1, atPath: path) },
            read: { ExtendedAttribute.get($0, atPath: path, into: &$1) })
    }

    /// ``write(atPath:domain:)`` where the caller has just read the file's status (`current`,
    /// `nil` for none): the status is not read again.
    func write(atPath path: String, domain: String, replacing current: ReplicaStatus?) {
        if current != self { ExtendedAttribute.set(Self.attribute, to: Array(rawValue.utf8), atPath: path) }
        Self.setIfDifferent(
            Self.domainAttribute, to: Array(domain.utf8), set: { ExtendedAttribute.set($0, to: $1, atPath: path) },
            read: { ExtendedAttribute.get($0, atPath: path, into: &$1) })
    }

    /// Writes the status and the domain's name on the open file `fd`, each only when it differs.
    /// Blocking.
    public func write(to fd: Int32, domain: String) {
        write(domain: domain, set: { ExtendedAttribute.set($0, to: $1, of: fd) }, read: { ExtendedAttribute.get($0, of: fd, into: &$1) })
    }

    private func write(domain: String, set: (String, [UInt8]) -> Int32, read: (String, inout [UInt8]) -> Int) {
        Self.setIfDifferent(Self.attribute, to: Array(rawValue.utf8), set: set, read: read)
        Self.setIfDifferent(Self.domainAttribute, to: Array(domain.utf8), set: set, read: read)
    }

    /// Sets attribute `name` to `value` unless it holds that value already (a write moves the
    /// file's change time).
    private static func setIfDifferent(
        _ name: String, to value: [UInt8], set: (String, [UInt8]) -> Int32, read: (String, inout [UInt8]) -> Int
    ) {
        var buffer = [UInt8](repeating: 0, count: max(64, value.count + 1))
        let length = read(name, &buffer)
        if length == value.count && Array(buffer[..<length]) == value { return }
        _ = set(name, value)
    }

    /// Writes the status and the domain's name on the file at `path` without reading them
    /// first: for a staging file no program sees yet, whose change time nothing reads (two
    /// system calls fewer per download). Blocking.
    func stamp(atPath path: String, domain: String) {
        stamp(StagedFile(path: path), domain: domain)
    }

    /// ``stamp(atPath:domain:)`` of a staging file, through its folder's descriptor when it
    /// has one. Blocking.
    func stamp(_ file: StagedFile, domain: String) {
        file.setAttribute(Self.attribute, to: Array(rawValue.utf8))
        file.setAttribute(Self.domainAttribute, to: Array(domain.utf8))
    }

    /// ``write(atPath:domain:)`` when `path` is a regular file (not a folder, whose status is
    /// ``FolderStatus``'s, nor a symlink). Blocking.
    public func writeIfFile(atPath path: String, domain: String) {
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return }
        write(atPath: path, domain: domain)
    }

    /// The status written on the file at `path`, or `nil`. Blocking.
    public static func read(atPath path: String) -> ReplicaStatus? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let length = ExtendedAttribute.get(attribute, atPath: path, into: &buffer)
        guard length > 0 else { return nil }
        return ReplicaStatus(rawValue: String(decoding: buffer[..<length], as: UTF8.self))
    }

    /// Whether a fetch that failed with `code` puts ``error`` on the item's file: the store was
    /// unreachable, refused or sent bytes that do not match what it announced; the local disk
    /// was full or failed. Not a cancelled fetch, nor one the engine declined (a local edit in
    /// the way, the item gone or changed in the store: the next sync deals with those).
    static func marksFailedFetch(_ code: FileProviderError.Code) -> Bool {
        switch code {
        case .serverUnreachable, .notAuthenticated, .permissionDenied, .corruptData, .localIOFailure, .fileWriteOutOfSpace:
            return true
        default:
            return false
        }
    }

    /// Writes ``error`` on the file that stands for the item at `relative` of `replica` whose
    /// fetch failed: its dataless or partly fetched file, its `.placeholder` file, or the
    /// earlier download a new version was to replace. Blocking.
    static func markFetchFailed(_ relative: String, in replica: Replica, domain: String) {
        let placeholder = replica.placeholderLocation(relative)
        if !markFetchFailed(atPath: placeholder, domain: domain), placeholder != replica.path(relative) {
            markFetchFailed(atPath: replica.path(relative), domain: domain)
        }
    }

    /// Writes ``error`` on the regular file at `path` whose fetch failed, unless it holds a
    /// local edit (``unsent``) or is a conflicted copy, whose status says more; returns whether
    /// a regular file is there. Blocking.
    @discardableResult
    static func markFetchFailed(atPath path: String, domain: String) -> Bool {
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return false }
        let current = read(atPath: path)
        if current != .unsent && current != .conflict { ReplicaStatus.error.write(atPath: path, domain: domain) }
        return true
    }

    /// The status of a downloaded file in sync with the store: ``pinned`` when its content policy
    /// (its own, else its folders') is `eager`, else ``downloaded``. Blocking (reads the
    /// policies along its path).
    static func downloaded(path: String, own: ContentPolicy?, store: MetadataStore, domainID: Int64) -> ReplicaStatus {
        downloaded(policy: try? PolicyResolver.read(from: store, domainID: domainID, along: path).effective(path, own: own).policy)
    }

    /// The status of a downloaded file in sync with the store whose content policy is `policy`
    /// (`nil`: unknown, as `lazy`): ``pinned`` for `eager`, else ``downloaded``.
    static func downloaded(policy: ContentPolicy?) -> ReplicaStatus {
        policy == .eager ? .pinned : .downloaded
    }

    /// Writes the in-sync status of a downloaded file (``downloaded(path:own:store:domainID:)``)
    /// on it. Blocking.
    static func markDownloaded(_ record: ItemRecord, in replica: Replica, domain: String, store: MetadataStore, domainID: Int64) {
        guard record.kind == .file else { return }
        downloaded(path: record.path, own: record.contentPolicy, store: store, domainID: domainID)
            .write(atPath: replica.path(record.path), domain: domain)
    }
}
