import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

/// The `dataless` layout guarded by fanotify: every file is under its real name, as Apple's
/// dataless files; one not downloaded is a sparse file with the item's size and dates, marked
/// with its item (``Replica/datalessAttribute``). The files live in a backing folder that the
/// engine reads and writes; programs see them at the replica path, a bind mount that `serve`
/// makes and guards, fetching contents when a program reads, writes, maps or runs a file.
public struct DatalessLayout: ReplicaLayout {
    public init() {}

    public var mode: ReplicaMode { .dataless }
    public var placeholderTakesItemsName: Bool { true }
    /// The item's file has the item's name, so a program writing that name writes the item's
    /// own file (and where the folder was not populated yet, it would have had the folder been
    /// opened first).
    public var writesAtAnItemsNameEditIt: Bool { true }
    public var keepsPartialContents: Bool { true }
    public var keepsFilesInBackingFolder: Bool { true }
    public var isGuardedOnAccess: Bool { true }
    public var mountsThroughFUSE: Bool { false }
    public var listsDatalessFoldersFromDatabase: Bool { false }
    public var writesFolderStatus: Bool { true }
    /// Programs change the backing folder directly (fanotify guards reads): `serve` watches it.
    public var recordsLocalChanges: Bool { false }
    /// Its files must be made by the engine, marked, in a backing folder of their own.
    public var canAdoptReplicaFolder: Bool { false }
    public var defaultHydration: Hydration { .progressive }

    // MARK: Not-downloaded items

    /// A dataless file (``Replica/createDatalessFile(_:_:)``).
    public func createPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        try replica.createDatalessFile(relative, metadata)
    }

    /// A dataless file, rewritten where it stands when there is one (``Replica/writeDatalessFile(_:_:replacing:)``).
    public func writePlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        try replica.writeDatalessFile(relative, metadata)
    }

    public func placeholderOwner(_ relative: String, in replica: Replica) -> PlaceholderOwner? {
        Replica.datalessOwner(atPath: replica.path(relative))
    }

    public func placeholderExists(_ relative: String, in replica: Replica) -> Bool {
        placeholderOwner(relative, in: replica) != nil
    }

    public func placeholderUnderItsName(_ relative: String, in replica: Replica) -> PlaceholderOwner? {
        Replica.datalessOwner(atPath: replica.path(relative))
    }

    public func placeholderLocation(_ relative: String, in replica: Replica) -> String { replica.path(relative) }

    /// Not in one pass: telling a dataless file needs a look at each file's attribute.
    public func placeholderNames(in relative: String, limit: Int, in replica: Replica) -> Set<String>? { nil }

    /// None: a dataless file has its item's name, and the scan tells it by its mark.
    public func itemName(ofPlaceholderEntry name: String, in relative: String, in replica: Replica) -> String? { nil }

    /// Only a dataless file is removed, never a file with contents.
    public func removePlaceholder(_ relative: String, in replica: Replica) throws(FileProviderError) {
        guard placeholderOwner(relative, in: replica) != nil else { return }
        try replica.removeFile(atPath: replica.path(relative))
    }

    public func movePlaceholder(from: String, to: String, in replica: Replica) throws(FileProviderError) {
        try replica.move(fromPath: replica.path(from), toPath: replica.path(to))
    }

    /// Every dataless file goes (they hold no contents: a kept folder must not keep files that
    /// look like contents and read as zeros), never a file with contents.
    public func removeAllPlaceholders(of domain: String, in replica: Replica) {
        guard let walker = FileManager.default.enumerator(atPath: replica.root.path) else { return }
        while let relative = walker.nextObject() as? String {
            try? removePlaceholder(relative, in: replica)
        }
    }

    // MARK: Contents

    /// The dataless file is replaced in one rename.
    public func placeFile(fromPath source: String, at relative: String, in replica: Replica) throws(FileProviderError) {
        let target = replica.path(relative)
        if replica.fingerprint(atPath: target) != nil && Replica.datalessOwner(atPath: target) == nil {
            throw FileProviderError(.filenameCollision, "\(target) is a file with contents; \(source) was not moved over it")
        }
        try replica.replace(fromPath: source, toPath: target)
    }

    /// A new dataless file is renamed over the downloaded one in one step; a program that has
    /// the old file open goes on reading the old contents, and the new file, another inode,
    /// carries none of `serve`'s marks that let reads through.
    public func replaceWithPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        try replica.writeDatalessFile(relative, metadata, replacing: true)
    }

    // MARK: Conversion

    /// A dataless file: it carries only the key of its item, whose metadata the database has.
    public func convertiblePlaceholder(named name: String, in relative: String, in replica: Replica) -> ConvertiblePlaceholder? {
        let path = relative.isEmpty ? name : relative + "/" + name
        guard let owner = Replica.datalessOwner(atPath: replica.path(path)) else { return nil }
        return ConvertiblePlaceholder(itemPath: path, owner: owner, metadata: nil)
    }

    public func isPlaceholderEntry(named name: String, in relative: String, in replica: Replica) -> Bool {
        Replica.datalessOwner(atPath: replica.path(relative.isEmpty ? name : relative + "/" + name)) != nil
    }

    /// A file with contents at the name (or one that takes it meanwhile) stays.
    public func writeConvertedPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, key: UInt64, in replica: Replica)
        throws(FileProviderError) -> Bool
    {
        let target = replica.path(relative)
        if replica.fingerprint(atPath: target) != nil && Replica.datalessOwner(atPath: target) == nil { return false }
        do {
            try replica.createDatalessFile(relative, metadata)
        } catch where error.code == .filenameCollision {
            return false
        }
        return true
    }

    // MARK: What commands show

    public func explainNotDownloaded(present: Int64, size: Int64, display: String, replicaPath: String) -> String {
        if present > 0 {
            return
                "partly fetched: \(present) of \(size) bytes are on disk (progressive hydration); a program reading the rest in \(replicaPath) while serve runs fetches what it reads, 'fileproviderctl materialize \(display)' all of it, 'fileproviderctl evict \(display)' gives the bytes back; programs that map holes first (SEEK_DATA/SEEK_HOLE, FIEMAP; not tar, which is given whole files) skip what is missing and read zeros"
        }
        return
            "dataless: under its real name, the contents not downloaded; a program reading it in \(replicaPath) while serve runs, or 'fileproviderctl materialize \(display)', downloads them; programs that map holes first (SEEK_DATA/SEEK_HOLE, FIEMAP; not tar, which is given whole files) skip what is missing and read zeros"
    }
}
