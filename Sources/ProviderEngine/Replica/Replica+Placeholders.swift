import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

/// Whose placeholder a placeholder is: the domain that wrote it (placeholder files name it; a
/// dataless file belongs to the domain of the folder it is in) and its item, by a hash of the
/// identifier (a dataless file keeps only the hash, so it fits inside the inode).
public struct PlaceholderOwner: Hashable, Sendable {
    public var domain: String?
    public var identifierKey: UInt64

    /// Whether this is the placeholder of `identifier`.
    public func isOwned(by identifier: ItemIdentifier) -> Bool { identifierKey == Self.key(identifier.rawValue) }

    /// The key of an identifier.
    public static func key(_ identifier: String) -> UInt64 { FNV1a.hash(identifier.utf8) }
}

/// The replica's placeholders, as its ``Replica/layout`` writes and reads them (see
/// ``ReplicaLayout`` for each operation). Blocking.
extension Replica {
    /// The placeholder at `relative`, whose item it stands for, or `nil` when there is none
    /// (nothing there, a real file, a file that is not a placeholder). Blocking.
    public func placeholderOwner(_ relative: String) -> PlaceholderOwner? {
        PoolCheck.note()
        return layout.placeholderOwner(relative, in: self)
    }

    /// The names whose placeholder stands in the folder `relative`, read in one pass over the
    /// folder; `nil` when it cannot be read or holds more than `limit` entries, or the layout
    /// cannot tell that way (the caller then looks name by name). Blocking.
    public func placeholderNames(in relative: String, limit: Int) -> Set<String>? {
        PoolCheck.note()
        return layout.placeholderNames(in: relative, limit: limit, in: self)
    }

    /// Whether a placeholder stands at `relative`. Blocking.
    public func placeholderExists(_ relative: String) -> Bool { layout.placeholderExists(relative, in: self) }

    /// The owner of a placeholder standing under the name `relative` itself (the file at an
    /// item's own name is then no contents), or `nil` (``ReplicaLayout/placeholderUnderItsName(_:in:)``).
    /// Blocking.
    public func placeholderUnderItsName(_ relative: String) -> PlaceholderOwner? {
        PoolCheck.note()
        return layout.placeholderUnderItsName(relative, in: self)
    }

    /// Whether a file a program writes at the name of an item that is not downloaded is an
    /// edit of that item (``ReplicaLayout/writesAtAnItemsNameEditIt``).
    var writesAtAnItemsNameEditIt: Bool { layout.writesAtAnItemsNameEditIt }

    /// Whether `identifier`'s own placeholder stands at `relative`. Blocking.
    public func isPlaceholder(of identifier: ItemIdentifier, at relative: String) -> Bool {
        placeholderOwner(relative)?.isOwned(by: identifier) == true
    }

    /// The absolute path of what stands for the not-downloaded item at `relative` (what moving
    /// its placeholder moves).
    public func placeholderLocation(_ relative: String) -> String { layout.placeholderLocation(relative, in: self) }

    /// Removes the placeholder at `relative`; nothing there is fine. A file with contents is
    /// never removed.
    /// - Throws: `localIOFailure` naming the file when it cannot be removed.
    public func removePlaceholder(_ relative: String) throws(FileProviderError) {
        PoolCheck.note()
        try layout.removePlaceholder(relative, in: self)
    }

    /// Renames the placeholder at `from` to `to`, refusing to replace anything.
    /// - Throws: `filenameCollision` when `to` is taken; `noSuchItem` when there is none.
    public func movePlaceholder(from: String, to: String) throws(FileProviderError) {
        PoolCheck.note()
        try layout.movePlaceholder(from: from, to: to, in: self)
    }

    /// Gives the file at `source` (in this replica or its staging folder) the name `relative`,
    /// where at most the item's placeholder may stand: it takes the placeholder's place.
    /// - Throws: `filenameCollision` when a file with contents has the name; `localIOFailure`.
    public func placeFile(fromPath source: String, at relative: String) throws(FileProviderError) {
        PoolCheck.note()
        try layout.placeFile(fromPath: source, at: relative, in: self)
    }

    /// Swaps a downloaded file for its placeholder (an eviction): afterwards the file is gone and
    /// the placeholder stands for the item (``ReplicaLayout/replaceWithPlaceholder(_:_:in:)``).
    /// - Throws: `localIOFailure` naming the file when it cannot be written or removed.
    public func replaceWithPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata) throws(FileProviderError) {
        PoolCheck.note()
        try layout.replaceWithPlaceholder(relative, metadata, in: self)
    }

    /// Removes every placeholder of the domain named `domain` from the replica, and nothing
    /// else (``ReplicaLayout/removeAllPlaceholders(of:in:)``). Blocking.
    public func removeAllPlaceholders(of domain: String) {
        PoolCheck.note()
        layout.removeAllPlaceholders(of: domain, in: self)
    }
}
