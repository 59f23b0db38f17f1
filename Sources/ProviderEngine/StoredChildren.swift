import ProviderCore
import ProviderStore

/// What the database has of a folder the walk listed: its stored children, and the stored
/// records of listed items that are stored elsewhere (moved into the folder under the same
/// identifier). Read in one job on the engine's executor, beside the walk.
struct StoredChildren: Sendable {
    static let none = StoredChildren(children: [], elsewhere: [:])

    var children: [ItemRecord]
    var elsewhere: [ItemIdentifier: ItemRecord]

    /// Reads the stored children of `folder` (when `children`) and, when `moves`, the records
    /// of the `listed` items that are not among them. Fails with `localIOFailure` when the
    /// database fails.
    static func read(
        of folder: ItemIdentifier, listed: [Item]?, _ context: DomainContext, children: Bool, moves: Bool
    ) async -> Result<StoredChildren, FileProviderError> {
        guard children || moves, let listed else { return .success(.none) }
        let (store, domainID) = (context.store, context.domainID)
        do {
            return .success(
                try await context.executor.run {
                    let stored = children ? try store.children(domainID: domainID, parent: folder) : []
                    var elsewhere: [ItemIdentifier: ItemRecord] = [:]
                    if moves {
                        let here = Set(stored.lazy.map(\.identifier))
                        for item in listed where !here.contains(item.identifier) {
                            if let record = try store.item(domainID: domainID, identifier: item.identifier) {
                                elsewhere[item.identifier] = record
                            }
                        }
                    }
                    return StoredChildren(children: stored, elsewhere: elsewhere)
                })
        } catch {
            return .failure(error)
        }
    }
}
