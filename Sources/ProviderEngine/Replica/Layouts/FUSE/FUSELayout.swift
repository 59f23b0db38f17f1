import Foundation
import ProviderCore
import ProviderStore

/// The `dataless` layout served through FUSE (`domain add --mode dataless --on-access fuse`):
/// every file under its real name with its real size and dates, fetched when a program reads
/// it, for any user on any kernel with FUSE. The engine keeps the files in the backing folder
/// (`<home>/replicas/<name>`) in the same form as ``DatalessLayout`` (a file not downloaded is a
/// sparse file marked with its item), so everything the engine does to a dataless file (sync
/// down, the local scan, progressive hydration, eviction, `why`) works unchanged; programs see
/// the files at the replica path, where `serve` mounts a ``ReplicaFileSystem`` over the
/// backing folder (``FUSEReplicaMount``) instead of fanotify's guarded bind mount.
///
/// What programs see differs from the fanotify layout: no holes (`lseek(SEEK_DATA/SEEK_HOLE)`
/// is answered by the kernel from the file's size, so `tar --sparse` and `cp` read every byte
/// and each read of missing bytes fetches them), and nothing at all without `serve` (the
/// replica folder is then an empty folder).
public struct FUSELayout: ReplicaLayout {
    /// The files' form on disk: the same as the fanotify layout's.
    private let files = DatalessLayout()

    public init() {}

    public var mode: ReplicaMode { .dataless }
    public var placeholderTakesItemsName: Bool { true }
    /// A program writing an item's name writes the item's own file (through the mount).
    public var writesAtAnItemsNameEditIt: Bool { true }
    public var keepsPartialContents: Bool { true }
    public var keepsFilesInBackingFolder: Bool { true }
    /// Not by fanotify: accesses go through the FUSE file system `serve` mounts.
    public var isGuardedOnAccess: Bool { false }
    public var mountsThroughFUSE: Bool { true }
    /// ``ReplicaFileSystem`` answers them from the database.
    public var listsDatalessFoldersFromDatabase: Bool { true }
    /// ``ReplicaFileSystem+FolderStatus.swift`` answers them from the database.
    public var writesFolderStatus: Bool { false }
    /// Every change goes through ``ReplicaFileSystem``, which records it (``ReplicaChangeFeed``).
    public var recordsLocalChanges: Bool { true }
    public var canAdoptReplicaFolder: Bool { false }
    public var defaultHydration: Hydration { .progressive }

    // MARK: Not-downloaded items

    public func createPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        try files.createPlaceholder(relative, metadata, in: replica)
    }

    public func writePlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        try files.writePlaceholder(relative, metadata, in: replica)
    }

    public func placeholderOwner(_ relative: String, in replica: Replica) -> PlaceholderOwner? {
        files.placeholderOwner(relative, in: replica)
    }

    public func placeholderExists(_ relative: String, in replica: Replica) -> Bool {
        files.placeholderExists(relative, in: replica)
    }

    public func placeholderUnderItsName(_ relative: String, in replica: Replica) -> PlaceholderOwner? {
        files.placeholderUnderItsName(relative, in: replica)
    }

    public func placeholderLocation(_ relative: String, in replica: Replica) -> String {
        files.placeholderLocation(relative, in: replica)
    }

    public func placeholderNames(in relative: String, limit: Int, in replica: Replica) -> Set<String>? {
        files.placeholderNames(in: relative, limit: limit, in: replica)
    }

    public func itemName(ofPlaceholderEntry name: String, in relative: String, in replica: Replica) -> String? {
        files.itemName(ofPlaceholderEntry: name, in: relative, in: replica)
    }

    public func removePlaceholder(_ relative: String, in replica: Replica) throws(FileProviderError) {
        try files.removePlaceholder(relative, in: replica)
    }

    public func movePlaceholder(from: String, to: String, in replica: Replica) throws(FileProviderError) {
        try files.movePlaceholder(from: from, to: to, in: replica)
    }

    public func removeAllPlaceholders(of domain: String, in replica: Replica) {
        files.removeAllPlaceholders(of: domain, in: replica)
    }

    // MARK: Contents

    public func placeFile(fromPath source: String, at relative: String, in replica: Replica) throws(FileProviderError) {
        try files.placeFile(fromPath: source, at: relative, in: replica)
    }

    /// A new dataless file is renamed over the downloaded one: another inode, which the mount
    /// tells the kernel about after the sync or eviction (``FUSEReplicaMount/refresh()``).
    public func replaceWithPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        try files.replaceWithPlaceholder(relative, metadata, in: replica)
    }

    // MARK: Conversion

    public func convertiblePlaceholder(named name: String, in relative: String, in replica: Replica) -> ConvertiblePlaceholder? {
        files.convertiblePlaceholder(named: name, in: relative, in: replica)
    }

    public func isPlaceholderEntry(named name: String, in relative: String, in replica: Replica) -> Bool {
        files.isPlaceholderEntry(named: name, in: relative, in: replica)
    }

    public func writeConvertedPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, key: UInt64, in replica: Replica)
        throws(FileProviderError) -> Bool
    {
        try files.writeConvertedPlaceholder(relative, metadata, key: key, in: replica)
    }

    // MARK: What commands show

    public func explainNotDownloaded(present: Int64, size: Int64, display: String, replicaPath: String) -> String {
        if present > 0 {
            return
                "partly fetched: \(present) of \(size) bytes are on disk (progressive hydration); a program reading the rest in \(replicaPath) while serve runs (the FUSE mount) fetches what it reads, 'fileproviderctl materialize \(display)' all of it, 'fileproviderctl evict \(display)' gives the bytes back"
        }
        return
            "dataless: under its real name, the contents not downloaded; a program reading it in \(replicaPath) while serve runs (the FUSE mount), or 'fileproviderctl materialize \(display)', downloads them"
    }
}
