import Foundation
import ProviderCore

/// The engine's second line against a broken or lying store: every ``Item`` a backend returns
/// passes ``ItemBounds`` before the engine uses it, whatever the adapter checked itself.
///
/// An item of a listing or a change feed with an impossible value moves to the page's (or
/// change set's) `refused`, which sync down reports as `DOMAIN:/folder: skipped an item: …`;
/// a single item (`item(for:)`, the item a download or an upload returns) with one is a
/// `corruptData` error naming it. A ranged read must return the file and version asked for and
/// exactly the requested range clamped to the file's size; a create or a change must return
/// the item asked for (its kind and name, and for a change its identifier unless a rename gave
/// it a new one). Everything else is passed through unchanged.
struct CheckedBackend: Backend {
    let base: any Backend

    init(_ base: any Backend) {
        self.base = (base as? CheckedBackend)?.base ?? base
    }

    var capabilities: BackendCapabilities { base.capabilities }

    /// - Throws: what the backend throws; `corruptData` for an item with an impossible value.
    func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        try ItemBounds.check(try await base.item(for: identifier))
    }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        var result = try await base.enumerateItems(in: container, startingAt: page)
        Self.sort(&result.items, refusing: &result.refused)
        return result
    }

    /// Whether the store lists every item below the root at once (``FlatListing``).
    var listsFlat: Bool { (base as? any FlatListing)?.listsFlat ?? false }

    /// One page of the store's flat listing, checked as a folder's page is.
    /// - Throws: `notSupported` when the store has no flat listing; what it throws.
    func enumerateAllItems(startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        guard let flat = base as? any FlatListing else {
            throw FileProviderError(.notSupported, "this store has no flat listing")
        }
        var result = try await flat.enumerateAllItems(startingAt: page)
        Self.sort(&result.items, refusing: &result.refused)
        return result
    }

    func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor {
        try await base.currentSyncAnchor(for: container)
    }

    func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor) async throws(FileProviderError) -> ChangeSet {
        var changes = try await base.enumerateChanges(in: container, from: anchor)
        Self.sort(&changes.updatedItems, refusing: &changes.refused)
        return changes
    }

    /// - Throws: what the backend throws; `corruptData` when the item it downloaded has an
    ///   impossible value.
    func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        try ItemBounds.check(
            try await base.fetchContents(
                for: identifier, version: version, to: destination, offset: offset, progress: progress))
    }

    /// Each file's outcome as the backend gives it; `corruptData` for a file whose item has an
    /// impossible value, and for every file when the backend returns another number of
    /// outcomes than files asked for.
    func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        let results = await base.fetchContents(requests, progress: progress)
        guard results.count == requests.count else {
            let error = FileProviderError(
                .corruptData, "a batch download of \(requests.count) files returned \(results.count) outcomes")
            return requests.map { _ in .failure(error) }
        }
        return results.map { result in result.flatMap { item in Result { () throws(FileProviderError) in try ItemBounds.check(item) } } }
    }

    /// - Throws: what the backend throws; `invalidArgument` for an empty range or one starting
    ///   below 0 (before asking the backend); `corruptData` when the item it read has an
    ///   impossible value, another identifier, kind or content version than asked, or the range
    ///   it says it wrote is not the requested range clamped to the item's size.
    func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try PartialContents.validate(range)
        var result = try await base.fetchPartialContents(
            for: identifier, version: version, range: range, into: destination)
        result.item = try ItemBounds.check(result.item)
        let item = result.item
        guard item.identifier.rawValue.utf8.elementsEqual(identifier.rawValue.utf8), item.kind == .file,
            item.version.content == version.content
        else {
            throw FileProviderError(
                .corruptData,
                "a ranged read of '\(identifier.rawValue)' returned \(item.kind) '\(item.identifier.rawValue)' of content version \(item.version.content.hexString), not the file of version \(version.content.hexString) asked for"
            )
        }
        let expected = PartialContents.clamp(range, toSize: item.size)
        guard result.range == expected else {
            throw FileProviderError(
                .corruptData,
                "a ranged read of '\(identifier.rawValue)' says it wrote bytes \(result.range.lowerBound)..<\(result.range.upperBound); asked for \(range.lowerBound)..<\(range.upperBound) of \(item.size) bytes, it should be \(expected.lowerBound)..<\(expected.upperBound)"
            )
        }
        return result
    }

    /// - Throws: what the backend throws; `corruptData` when the created item has an
    ///   impossible value, or is not the item asked for: another kind, or another name or
    ///   folder than the template's (unless still pending).
    func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        var result = try await base.createItem(basedOn: template, fields: fields, contents: contents, options: options)
        result.item = try ItemBounds.check(result.item)
        try Self.checkReply(result, to: "create", of: template, naming: template.filename)
        return result
    }

    /// - Throws: what the backend throws; `corruptData` when the changed item has an
    ///   impossible value, or is not the item asked for: another kind; another name or folder
    ///   than the one asked (the new one of a rename or move, else the item's own; unless still
    ///   pending);
    ///   another identifier, unless the change renamed or moved an item of a store whose
    ///   identifiers are paths.
    func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        var result = try await base.modifyItem(
            item, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options)
        result.item = try ItemBounds.check(result.item)
        try Self.checkReply(result, to: "change", of: item, naming: item.filename)
        let movable = !changedFields.isDisjoint(with: [.filename, .parentItemIdentifier])
        if !(movable && capabilities.identifiersArePathDerived),
            !result.item.identifier.rawValue.utf8.elementsEqual(item.identifier.rawValue.utf8)
        {
            throw FileProviderError(
                .corruptData,
                "the store answered a change of '\(item.identifier.rawValue)' with another item, '\(result.item.identifier.rawValue)'; nothing was recorded"
            )
        }
        return result
    }

    /// Checks that the item a create or a change returned is the one asked for: the same kind,
    /// the name asked for (by bytes) and the folder asked for, unless the store says the name
    /// or the folder is still pending.
    /// - Throws: `corruptData` naming both.
    private static func checkReply(_ result: ItemResult, to operation: String, of asked: Item, naming name: String)
        throws(FileProviderError)
    {
        let item = result.item
        if item.kind != asked.kind {
            throw FileProviderError(
                .corruptData,
                "the store answered the \(operation) of \(asked.kind) \(name.debugDescription) with a \(item.kind); nothing was recorded")
        }
        if !result.stillPendingFields.contains(.filename), !item.filename.utf8.elementsEqual(name.utf8) {
            throw FileProviderError(
                .corruptData,
                "the store answered the \(operation) of \(name.debugDescription) with an item named \(item.filename.debugDescription); nothing was recorded"
            )
        }
        if !result.stillPendingFields.contains(.parentItemIdentifier),
            !item.parentIdentifier.rawValue.utf8.elementsEqual(asked.parentIdentifier.rawValue.utf8)
        {
            throw FileProviderError(
                .corruptData,
                "the store answered the \(operation) of \(name.debugDescription) in '\(asked.parentIdentifier.rawValue)' with an item in '\(item.parentIdentifier.rawValue)'; nothing was recorded"
            )
        }
    }

    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        try await base.deleteItem(identifier: identifier, baseVersion: baseVersion, options: options)
    }

    func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError) -> Data {
        try await base.fetchThumbnail(for: identifier, size: size)
    }

    func close() async { await base.close() }

    /// Moves the items with impossible values from `items` to `refused`.
    private static func sort(_ items: inout [Item], refusing refused: inout [RefusedItem]) {
        // The usual case, nothing impossible, copies nothing (each item's values are read in
        // place: `contains(where:)`, or passing an item, would copy every one).
        let anyImpossible = items.withUnsafeBufferPointer { buffer in
            buffer.indices.contains { index in
                ItemBounds.problem(
                    kind: buffer[index].kind, size: buffer[index].size,
                    contentModificationDate: buffer[index].contentModificationDate,
                    creationDate: buffer[index].creationDate) != nil
            }
        }
        guard anyImpossible else { return }
        var kept: [Item] = []
        kept.reserveCapacity(items.count)
        for item in items {
            if let problem = ItemBounds.problem(with: item) {
                refused.append(RefusedItem(item, problem))
            } else {
                kept.append(item)
            }
        }
        items = kept
    }
}
