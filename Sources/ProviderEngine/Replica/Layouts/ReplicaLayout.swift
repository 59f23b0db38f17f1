import Foundation
import ProviderCore
import ProviderStore

/// How items appear in a domain's replica folder: the one seam between the sync algorithm and
/// the form of a not-downloaded item on disk, as Nextcloud's desktop client keeps its `Vfs`
/// plugins apart from its sync code. The engine asks the domain's layout (``Replica/layout``)
/// and never which layout it is; each implementation lives in a folder of its own under
/// `Replica/Layouts/`, and ``ReplicaLayouts`` picks one from the domain record.
///
/// Every operation is blocking (it runs on the engine's `BlockingExecutor`) and works in the
/// folder of the ``Replica`` it is given, by relative path; a method that throws throws
/// `FileProviderError` naming the path.
public protocol ReplicaLayout: Sendable {
    /// The mode the domain record stores for this layout (shown by `domain show`, written in a
    /// conversion's marker).
    var mode: ReplicaMode { get }

    // MARK: Traits

    /// Whether a not-downloaded file stands under the item's own name (a dataless file), so a
    /// file found at an item's name may be its placeholder rather than contents; `false` when
    /// it stands beside it under a name of its own (a `.placeholder` file).
    var placeholderTakesItemsName: Bool { get }

    /// Whether a file a program writes at the name of an item that is not downloaded is an edit
    /// of that item (uploaded as its new contents); `false` when it is kept beside the item and
    /// sent as a conflicted copy (the writer never saw the item's contents).
    var writesAtAnItemsNameEditIt: Bool { get }

    /// Whether a not-downloaded file can hold some of its contents (progressive hydration): the
    /// database records its present ranges, which eviction gives back.
    var keepsPartialContents: Bool { get }

    /// Whether the engine keeps the domain's files in a backing folder under the state folder
    /// (`<home>/replicas/<name>`), programs seeing them at the replica path through `serve`;
    /// `false` when the replica path is the folder the engine works in.
    var keepsFilesInBackingFolder: Bool { get }

    /// Whether programs' accesses to the replica are guarded on access (fanotify pre-content
    /// events through the mount `serve` makes and its guardian watches).
    var isGuardedOnAccess: Bool { get }

    /// Whether programs reach the replica through a FUSE file system that `serve` mounts at the
    /// replica path over the backing folder (``FUSEReplicaMount``).
    var mountsThroughFUSE: Bool { get }

    /// Whether programs see the items of a dataless folder without the folder being written:
    /// the layout answers its names, attributes and listings from the database. Then sync writes
    /// no dataless folder (a population budget of 0), `serve` neither watches nor populates them
    /// in the background, and a folder is written only when a program needs its entries.
    var listsDatalessFoldersFromDatabase: Bool { get }

    /// Whether the engine writes a folder's status attributes (``FolderStatus``) on the folder
    /// itself as its state changes; `false` when the layout answers them from the database
    /// when a program asks (a FUSE mount), so nothing is written on its backing folders.
    var writesFolderStatus: Bool { get }

    /// Whether the layout sees every change programs make in the replica as it happens and
    /// records it (``ReplicaChangeFeed``): the local change feed is exact, so `serve` takes the
    /// changed folders from it instead of a watcher, and sync up compares only those (the whole
    /// replica only when the feed cannot be trusted: after an unclean stop or a conversion).
    var recordsLocalChanges: Bool { get }

    /// Whether a domain of this layout may adopt an existing replica folder when it is added.
    var canAdoptReplicaFolder: Bool { get }

    /// How a new domain of this layout fetches a file a program reads, unless told otherwise.
    var defaultHydration: Hydration { get }

    // MARK: Not-downloaded items

    /// Writes the placeholder of a new item at `relative`, never overwriting a file with
    /// contents; an existing placeholder of the item (left by an interrupted sync) is replaced.
    /// - Throws: `filenameCollision` when a file with contents stands where it goes;
    ///   `insufficientQuota` or `localIOFailure` when it cannot be written.
    func createPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica) throws(FileProviderError)

    /// Writes (or rewrites) the placeholder of an item at `relative` atomically.
    /// - Throws: as ``createPlaceholder(_:_:in:)``.
    func writePlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica) throws(FileProviderError)

    /// The placeholder of the item at `relative`, whose item it stands for, or `nil` when there
    /// is none (nothing there, a file with contents, a file that is not a placeholder).
    func placeholderOwner(_ relative: String, in replica: Replica) -> PlaceholderOwner?

    /// Whether a placeholder stands for the item at `relative`.
    func placeholderExists(_ relative: String, in replica: Replica) -> Bool

    /// The owner of a placeholder that stands under the name `relative` itself (so the file at
    /// an item's own name is no contents), or `nil`. Always `nil` in a layout whose placeholders
    /// have names of their own.
    func placeholderUnderItsName(_ relative: String, in replica: Replica) -> PlaceholderOwner?

    /// The absolute path of the file that stands for the not-downloaded item at `relative`:
    /// what a move of the placeholder moves.
    func placeholderLocation(_ relative: String, in replica: Replica) -> String

    /// The names of the items whose placeholder stands in the folder `relative`, read in one
    /// pass; `nil` when the folder cannot be read, holds more than `limit` entries, or the
    /// layout cannot tell that way (the caller then asks name by name).
    func placeholderNames(in relative: String, limit: Int, in replica: Replica) -> Set<String>?

    /// The item name the folder entry `name` in the folder `relative` stands for when it is a
    /// placeholder under a name of its own (`<name>.placeholder`), else `nil`: the local scan
    /// skips such an entry as contents and counts it for its item.
    func itemName(ofPlaceholderEntry name: String, in relative: String, in replica: Replica) -> String?

    /// Removes the placeholder at `relative`; nothing there is fine, and a file with contents
    /// is never removed.
    /// - Throws: `localIOFailure` naming the file when it cannot be removed.
    func removePlaceholder(_ relative: String, in replica: Replica) throws(FileProviderError)

    /// Renames the placeholder at `from` to `to`, refusing to replace anything.
    /// - Throws: `filenameCollision` when `to` is taken; `noSuchItem` when there is none.
    func movePlaceholder(from: String, to: String, in replica: Replica) throws(FileProviderError)

    /// Removes every placeholder of the domain named `domain` from the folder (moved ones too),
    /// and nothing else: what `domain remove --keep-replica` leaves is the user's files.
    func removeAllPlaceholders(of domain: String, in replica: Replica)

    // MARK: Contents

    /// Gives the file at `source` (in the replica or its staging folder) the name `relative`,
    /// where at most the item's placeholder may stand: it takes the placeholder's place.
    /// - Throws: `filenameCollision` when a file with contents has the name; `localIOFailure`.
    func placeFile(fromPath source: String, at relative: String, in replica: Replica) throws(FileProviderError)

    /// Swaps the downloaded file at `relative` for its placeholder (an eviction): afterwards the
    /// file is gone and the placeholder stands for the item.
    /// - Throws: `localIOFailure` naming the file when it cannot be written or removed.
    func replaceWithPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, in replica: Replica)
        throws(FileProviderError)

    // MARK: Conversion

    /// The placeholder that the folder entry `name` in the folder `relative` is, read for a
    /// conversion to another layout, or `nil` when it is none of this layout's (or it cannot be
    /// read): then the entry is kept as a file unless the other layout recognises it.
    func convertiblePlaceholder(named name: String, in relative: String, in replica: Replica) -> ConvertiblePlaceholder?

    /// Whether the folder entry `name` in the folder `relative` is a placeholder of this layout
    /// (made by an interrupted conversion to it): not counted as a file.
    func isPlaceholderEntry(named name: String, in relative: String, in replica: Replica) -> Bool

    /// Writes the placeholder of an item converted from another layout at `relative`.
    /// Returns `false`, writing nothing, when a file with contents holds the place (the old
    /// placeholder is then only removed: it holds no contents).
    /// - Throws: `filenameCollision` when a file that is no placeholder of the item stands
    ///   where this layout never writes over one; as ``writePlaceholder(_:_:in:)``.
    func writeConvertedPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata, key: UInt64, in replica: Replica)
        throws(FileProviderError) -> Bool

    // MARK: What commands show

    /// Why a not-downloaded file of `size` bytes with `present` bytes on disk is so, for
    /// `fileproviderctl why`; `display` names the item, `replicaPath` where programs see it.
    func explainNotDownloaded(present: Int64, size: Int64, display: String, replicaPath: String) -> String
}

/// A placeholder found by a conversion (``ReplicaLayout/convertiblePlaceholder(named:in:in:)``):
/// the path of its item and whose it is; its metadata when the placeholder carries it (a
/// `.placeholder` file), else the caller reads it from the database by ``owner``.
public struct ConvertiblePlaceholder: Sendable {
    public var itemPath: String
    public var owner: PlaceholderOwner
    public var metadata: PlaceholderMetadata?
}
