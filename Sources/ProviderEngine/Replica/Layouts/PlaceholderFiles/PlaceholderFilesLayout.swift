import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The `placeholder-files` layout: a file that is not downloaded is `<name>.placeholder` beside
/// its real name, a small JSON file with the item's metadata (``PlaceholderMetadata``; a name
/// too long for the suffix is shortened, ``PlaceholderName``). Works on any file system,
/// without `serve` and without root; no program can open a file that is not downloaded.
public struct PlaceholderFilesLayout: ReplicaLayout {
    public init() {}

    public var mode: ReplicaMode { .placeholderFiles }
    public var placeholderTakesItemsName: Bool { false }
    /// A `.placeholder` file's name is never the item's: what a program writes at the item's
    /// name is kept beside the item.
    public var writesAtAnItemsNameEditIt: Bool { false }
    public var keepsPartialContents: Bool { false }
    public var keepsFilesInBackingFolder: Bool { false }
    public var isGuardedOnAccess: Bool { false }
    public var mountsThroughFUSE: Bool { false }
    public var listsDatalessFoldersFromDatabase: Bool { false }
    public var writesFolderStatus: Bool { true }
    /// Programs change the replica folder directly: `serve` watches it, sync up compares it.
    public var recordsLocalChanges: Bool { false }
    public var canAdoptReplicaFolder: Bool { true }
    public var defaultHydration: Hydration { .full }

    // MARK: Not-downloaded items

    /// The file is written unnamed first (`O_TMPFILE`) and named once complete, so a crash never
    /// leaves half a placeholder; making an unnamed file also does not hold the folder's lock,
    /// so the threads writing placeholders into one folder do not queue there while the file
    /// system finds a free inode (slow on ext4 without a journal after a large deletion). Where
    /// the file system has no unnamed files, the placeholder is created under its name.
    public func createPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        let target = replica.placeholderPath(relative)
        let bytes = metadata.encoded
        let folder = target.lastIndex(of: "/").map { String(target[..<$0]) } ?? "."
        let unnamed = SystemCalls.openUnnamed(inFolder: folder, mode: 0o644)
        if unnamed >= 0 {
            defer { close(unnamed) }
            try replica.writeAll(unnamed, bytes, path: target)
            ReplicaStatus.dataless.write(to: unnamed, domain: metadata.domain)
            if SystemCalls.linkUnnamed(unnamed, to: target) == 0 { return }
            if errno == EEXIST { return try writePlaceholder(relative, metadata, in: replica) }
            // No /proc to name it through: create it under its name below.
        }
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        if fd < 0 {
            if errno == EEXIST { return try writePlaceholder(relative, metadata, in: replica) }
            throw POSIXError.error("cannot create placeholder", path: target)
        }
        defer { close(fd) }
        try replica.writeAll(fd, bytes, path: target)
        ReplicaStatus.dataless.write(to: fd, domain: metadata.domain)
    }

    /// A temporary file renamed into place, as Apple's `writePlaceholder(at:withMetadata:)`.
    public func writePlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        let target = replica.placeholderPath(relative)
        try replica.atomicWrite(metadata.encoded, to: target)
        ReplicaStatus.dataless.write(atPath: target, domain: metadata.domain)
    }

    public func placeholderOwner(_ relative: String, in replica: Replica) -> PlaceholderOwner? {
        guard let metadata = try? replica.readPlaceholder(relative) else { return nil }
        return PlaceholderOwner(domain: metadata.domain, identifierKey: PlaceholderOwner.key(metadata.identifier))
    }

    public func placeholderExists(_ relative: String, in replica: Replica) -> Bool {
        replica.fingerprint(atPath: replica.placeholderPath(relative)) != nil
    }

    /// Never: a file at an item's own name is contents.
    public func placeholderUnderItsName(_ relative: String, in replica: Replica) -> PlaceholderOwner? { nil }

    public func placeholderLocation(_ relative: String, in replica: Replica) -> String { replica.placeholderPath(relative) }

    public func placeholderNames(in relative: String, limit: Int, in replica: Replica) -> Set<String>? {
        guard let directory = opendir(replica.path(relative)) else { return nil }
        defer { closedir(directory) }
        var names = Set<String>()
        var entries = 0
        let suffix = Replica.placeholderSuffix.utf8.count
        // readdir ends with NULL on an error too: only errno tells a listing cut short.
        errno = 0
        while let entry = readdir(directory) {
            entries += 1
            if entries > limit { return nil }
            // A name that is no valid file name is no item's either.
            if let name = Filename.decode(entry), name.utf8.count > suffix,
                let item = replica.itemName(ofPlaceholderFile: name, in: relative)
            {
                names.insert(item)
            }
            errno = 0
        }
        return errno == 0 ? names : nil
    }

    public func itemName(ofPlaceholderEntry name: String, in relative: String, in replica: Replica) -> String? {
        replica.itemName(ofPlaceholderFile: name, in: relative)
    }

    public func removePlaceholder(_ relative: String, in replica: Replica) throws(FileProviderError) {
        try replica.removeFile(atPath: replica.placeholderPath(relative))
    }

    public func movePlaceholder(from: String, to: String, in replica: Replica) throws(FileProviderError) {
        try replica.move(fromPath: replica.placeholderPath(from), toPath: replica.placeholderPath(to))
    }

    /// A file under a `.placeholder` name that is not one of the domain's placeholders stays.
    public func removeAllPlaceholders(of domain: String, in replica: Replica) {
        guard let walker = FileManager.default.enumerator(atPath: replica.root.path) else { return }
        while let relative = walker.nextObject() as? String {
            guard relative.hasSuffix(Replica.placeholderSuffix) else { continue }
            let base = String(relative.dropLast(Replica.placeholderSuffix.count))
            guard let metadata = try? replica.readPlaceholder(base), metadata.domain == domain else { continue }
            try? replica.removeFile(atPath: replica.placeholderPath(base))
        }
    }

    // MARK: Contents

    /// The file is renamed to the free name, then the `.placeholder` file removed.
    public func placeFile(fromPath source: String, at relative: String, in replica: Replica) throws(FileProviderError) {
        try replica.move(fromPath: source, toPath: replica.path(relative))
        try replica.removeFile(atPath: replica.placeholderPath(relative))
    }

    /// The placeholder is written first, then the file removed.
    public func replaceWithPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)
    {
        try writePlaceholder(relative, metadata, in: replica)
        try replica.removeFile(atPath: replica.path(relative))
    }

    // MARK: Conversion

    /// A `.placeholder` file whose metadata reads, with that metadata.
    public func convertiblePlaceholder(named name: String, in relative: String, in replica: Replica) -> ConvertiblePlaceholder? {
        guard let item = replica.itemName(ofPlaceholderFile: name, in: relative) else { return nil }
        let path = relative.isEmpty ? item : relative + "/" + item
        guard let metadata = try? replica.readPlaceholder(path) else { return nil }
        return ConvertiblePlaceholder(
            itemPath: path, owner: PlaceholderOwner(domain: metadata.domain, identifierKey: PlaceholderOwner.key(metadata.identifier)),
            metadata: metadata)
    }

    public func isPlaceholderEntry(named name: String, in relative: String, in replica: Replica) -> Bool {
        name.hasSuffix(Replica.placeholderSuffix)
    }

    /// A `.placeholder` file in the way that is not this item's placeholder is never
    /// overwritten: it may be the user's.
    public func writeConvertedPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, key: UInt64, in replica: Replica)
        throws(FileProviderError) -> Bool
    {
        let placeholder = replica.placeholderPath(relative)
        if replica.fingerprint(atPath: placeholder) != nil {
            let existing = try? replica.readPlaceholder(relative)
            guard let existing, existing.domain == metadata.domain, PlaceholderOwner.key(existing.identifier) == key else {
                throw FileProviderError(
                    .filenameCollision,
                    "\(placeholder) is in the way of the placeholder of \(metadata.domain):/\(relative); move it out of the way and run the same command again"
                )
            }
        }
        try writePlaceholder(relative, metadata, in: replica)
        return true
    }

    // MARK: What commands show

    public func explainNotDownloaded(present: Int64, size: Int64, display: String, replicaPath: String) -> String {
        "placeholder: the contents are not downloaded; 'fileproviderctl materialize \(display)' downloads them"
    }
}
