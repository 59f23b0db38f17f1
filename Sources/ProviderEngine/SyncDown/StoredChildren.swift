import Foundation
import ProviderCore
import ProviderStore

/// What the database has of a folder the walk listed: its stored children, and the stored
/// records of listed items that are stored elsewhere (moved into the folder under the same
/// identifier). Read in one job on the engine's executor, beside the walk, with the listing's
/// digest (``ListingDigest``; with nothing to read, the digest alone, in the caller's task):
/// when the folder was listed the same way before and none of its rows changed since, only its
/// subfolders are read (``isUnchanged``).
struct StoredChildren: Sendable {
    static let none = StoredChildren(children: [], elsewhere: [:])

    /// The folder's stored children; only its subfolders when ``isUnchanged``.
    var children: [ItemRecord]
    var elsewhere: [ItemIdentifier: ItemRecord]
    /// The digest of the listing's entries (``ListingDigest/entries(of:)``), `nil` without a
    /// listing.
    var entriesDigest: ListingDigest.Entries?
    /// The listing is the one the folder's rows were last made to match: nothing to compare.
    var isUnchanged = false

    /// Reads the stored children of the folder `visit` reached (when `children`) and, when
    /// `moves`, the records of the `listing`'s items that are not among them. With
    /// `trustsDigest`, a folder whose kept digest matches the listing's is read as unchanged
    /// (`rootLength`: the replica root's length, part of the digest). Fails with
    /// `localIOFailure` when the database fails.
    static func read(
        of visit: FolderVisit, listing: ItemListing?, rootLength: Int, _ context: DomainContext, children: Bool, moves: Bool,
        trustsDigest: Bool = true
    ) async -> Result<StoredChildren, FileProviderError> {
        guard let listing else { return .success(.none) }
        if !children && !moves {
            // Nothing to read (a folder new in a domain's first sync): the digest is CPU work
            // only, made here rather than in a job of the executor (a thread's wake-up and a hop
            // back per folder, 10,100 of them in a first sync of a million items).
            return .success(StoredChildren(children: [], elsewhere: [:], entriesDigest: ListingDigest.entries(of: listing)))
        }
        let (store, domainID) = (context.store, context.domainID)
        do {
            return .success(
                try await context.executor.run {
                    let entries = ListingDigest.entries(of: listing)
                    var stored: [ItemRecord] = []
                    if children {
                        let digest =
                            trustsDigest && !visit.isNew
                            ? ListingDigest.seal(entries, folder: visit.record, ancestors: visit.ancestors, rootLength: rootLength)
                            : nil
                        let folder = try store.storedFolder(domainID: domainID, parent: visit.record.identifier, digest: digest)
                        if folder.isUnchanged {
                            return StoredChildren(children: folder.children, elsewhere: [:], entriesDigest: entries, isUnchanged: true)
                        }
                        stored = folder.children
                    }
                    var elsewhere: [ItemIdentifier: ItemRecord] = [:]
                    if moves {
                        let here = Set(stored.lazy.map(\.identifier))
                        for item in listing.items where !here.contains(item.identifier) {
                            if let record = try store.item(domainID: domainID, identifier: item.identifier) {
                                elsewhere[item.identifier] = record
                            }
                        }
                    }
                    return StoredChildren(children: stored, elsewhere: elsewhere, entriesDigest: entries)
                })
        } catch {
            return .failure(error)
        }
    }
}
