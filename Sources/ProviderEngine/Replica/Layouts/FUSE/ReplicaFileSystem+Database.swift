import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Items of dataless folders, answered from the database: a folder the database calls
/// dataless was never written to the backing folder (or is an empty folder there), and its
/// names, attributes and listing come from its rows, as the engine would write them:
///
/// - size, kind and modification date from the record (the store's); access and change time
///   the modification date;
/// - permission bits as the engine's backing files get them: `0644` less this process's umask
///   for files, with x where r is set when the store says the file is executable, `0755` less
///   the umask for folders, `0777` for symbolic links (whose target is the record's);
/// - owner and group this process's user, as the backing files' (the user `serve` runs as);
/// - a file's blocks on disk those of the dataless file the engine would write (its first 4 KiB
///   block): never none, or `tar --sparse` would archive the file as one hole without reading
///   it; one link (so `find` does not count subfolders by it).
///
/// Nothing here writes to disk or reaches the store; a database that cannot be read answers as
/// if there were no such item.
extension ReplicaFileSystem {
    /// The item at `path` (relative) in the database, or nil.
    func storedItem(_ path: [UInt8]) -> ItemRecord? {
        (try? fetcher.manager.store.item(domainID: fetcher.domainID, path: text(path))) ?? nil
    }

    /// Whether the folder at `path` is dataless in the database and holds items there.
    func holdsStoredItems(_ path: [UInt8]) -> Bool {
        guard let record = storedItem(path), record.kind == .folder, record.isDataless else { return false }
        let first = try? fetcher.manager.store.children(domainID: fetcher.domainID, inFolderAt: record.path, after: nil, limit: 1)
        return first?.isEmpty == false
    }

    /// Where the items of the folder `inode` at `path` come from: known once, then kept (the
    /// database when its record is a dataless folder).
    func source(ofFolder inode: UInt64, _ path: [UInt8]) -> ReplicaInodes.Source {
        if let known = inodes.source(of: inode) { return known }
        let record = storedItem(path)
        let source: ReplicaInodes.Source = record.map { $0.kind == .folder && $0.isDataless } == true ? .database : .disk
        inodes.setSource(inode, source)
        return source
    }

    /// Whether `record`, an item of the folder `inode` that the mount answers from the database,
    /// says the folder is written after all: a downloaded file, or a written folder, is only ever
    /// in a written folder. Another process (a `sync`, `materialize` or `populate` of the command
    /// line) wrote it behind the mount, which hears of that only at `serve`'s next sync
    /// (``FUSEReplicaMount/refresh()``); until then the folder and those above it are taken as on
    /// disk from here, so the item is answered from its backing file (its status, its bytes)
    /// rather than as dataless. Taken only when its backing entry, at `path` (relative), is there:
    /// a row alone is not enough (an empty folder of the store need not be written).
    func isWrittenBehind(_ record: ItemRecord, at path: [UInt8], in inode: UInt64) -> Bool {
        guard record.state == .materialized || (record.kind == .folder && !record.isDataless), (try? status(path)) != nil else {
            return false
        }
        inodes.setOnDisk(inode)
        return true
    }

    /// Records that the folder `inode`, answered from `record`, lists from the database when the
    /// record says it is dataless (and nothing else said otherwise yet).
    func noteSource(of inode: UInt64, _ record: ItemRecord) {
        guard record.kind == .folder, record.isDataless, inodes.source(of: inode) == nil else { return }
        inodes.setSource(inode, .database)
    }

    /// The permission and type bits of `record`'s item.
    func storedMode(_ record: ItemRecord) -> UInt32 { storedMode(record.kind, flags: record.fileSystemFlags) }

    /// The permission and type bits of an item of `kind` with the file system flags `flags`.
    func storedMode(_ kind: ItemKind, flags: Int) -> UInt32 {
        switch kind {
        case .folder: return UInt32(S_IFDIR) | folderMode
        case .symlink: return UInt32(S_IFLNK) | 0o777
        case .file: return UInt32(S_IFREG) | FileSystemFlags(rawValue: flags).applied(toMode: fileMode)
        }
    }

    /// The size `stat` shows of `record`'s item: a link's target's length.
    static func storedSize(_ record: ItemRecord) -> UInt64 {
        storedSize(record.kind, size: record.size, targetLength: record.symlinkTarget?.utf8.count ?? 0)
    }

    /// The size `stat` shows of an item of `kind` and `size`: a link's target's length.
    static func storedSize(_ kind: ItemKind, size: Int64, targetLength: Int) -> UInt64 {
        switch kind {
        case .symlink: return UInt64(max(0, targetLength))
        case .folder: return 0
        case .file: return UInt64(max(0, size))
        }
    }

    /// The modification time of `record`'s item, as the engine sets it on a dataless file
    /// (``Replica`` rounds the seconds down and keeps the rest as nanoseconds).
    static func storedTime(_ record: ItemRecord) -> timespec {
        storedTime(seconds: (record.modificationDate ?? record.creationDate)?.timeIntervalSince1970 ?? 0)
    }

    /// ``storedTime(_:)`` of a date `seconds` since 1970.
    static func storedTime(seconds: Double) -> timespec {
        let whole = seconds.rounded(.down)
        return timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))
    }

    /// What the kernel is told about `record`'s item (``ReplicaInodes/Seen``).
    func storedSeen(_ record: ItemRecord) -> ReplicaInodes.Seen {
        ReplicaInodes.Seen(size: Int64(clamping: Self.storedSize(record)), modification: Self.storedTime(record), mode: storedMode(record))
    }

    /// The attributes of `record`'s item under `inode`.
    func storedAttributes(_ record: ItemRecord, inode: UInt64, generation: UInt64) -> FUSEAttributes {
        storedAttributes(
            inode: inode, generation: generation, mode: storedMode(record), size: Self.storedSize(record), time: Self.storedTime(record),
            isNonEmptyFile: record.kind == .file && record.size > 0)
    }

    /// What the kernel is told about a listing's `entry` (``ReplicaInodes/Seen``), and its
    /// attributes under an inode and generation still to be filled in.
    func stored(_ entry: FolderEntryPage.Entry) -> (seen: ReplicaInodes.Seen, attributes: FUSEAttributes) {
        let mode = storedMode(entry.kind, flags: entry.fileSystemFlags)
        let size = Self.storedSize(entry.kind, size: entry.size, targetLength: entry.symlinkTargetLength)
        // Through `Date`, as a record's date is read back, so that a listing and a lookup tell
        // the kernel the same nanoseconds.
        let time = Self.storedTime(seconds: Date(timeIntervalSince1970: entry.modificationSeconds).timeIntervalSince1970)
        let attributes = storedAttributes(
            inode: 0, generation: 0, mode: mode, size: size, time: time, isNonEmptyFile: entry.kind == .file && entry.size > 0)
        return (ReplicaInodes.Seen(size: Int64(clamping: size), modification: time, mode: mode), attributes)
    }

    private func storedAttributes(inode: UInt64, generation: UInt64, mode: UInt32, size: UInt64, time: timespec, isNonEmptyFile: Bool)
        -> FUSEAttributes
    {
        let time = FUSETimestamp(time)
        return FUSEAttributes(
            inode: inode, mode: mode, size: size, linkCount: 1, owner: owner, group: group, modificationTime: time, accessTime: time,
            changeTime: time, allocatedSize: isNonEmptyFile ? UInt64(Replica.leadingBlock) : 0, generation: generation)
    }

    /// This process's umask (`Umask:` of `/proc/self/status`; `umask(2)` cannot be read without
    /// setting it), `022` when it cannot be read.
    static func processUmask() -> UInt32 {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
            let value = UInt32(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8)
        else { return 0o022 }
        return value
    }
}
