import Foundation
import ProviderCore

/// A backend seen through a name suffix its store needs (a store that lists only some files,
/// such as the media API's original dialect, which lists `.jpg`, `.jpeg` and `.png` files
/// only): items are created and renamed with the suffix added to their name (folders too, so a
/// file and a folder of one name still collide), and every item read back has it taken off
/// again. Names the store must refuse anyway (``Filename/validate(_:)``) are passed as they
/// are. Identifiers are the backend's own.
///
/// ``BackendConformance`` runs its checks through it for a backend whose
/// ``BackendConformance/Limitations/fileNameSuffix`` is set, so the checks' names need no
/// knowledge of the store.
struct SuffixedNames: Backend {
    let inner: any Backend
    let suffix: String

    var capabilities: BackendCapabilities { inner.capabilities }

    /// `name` with the suffix, when it is a valid name.
    private func adding(to name: String, kind: ItemKind) -> String {
        guard (try? Filename.validate(name)) != nil else { return name }
        return name + suffix
    }

    /// `item` with the suffix taken off its name (a name that ends in it).
    private func stripped(_ item: Item) -> Item {
        var item = item
        let (name, tail) = (Array(item.filename.utf8), Array(suffix.utf8))
        if name.count > tail.count, name.suffix(tail.count).elementsEqual(tail) {
            item.filename = String(decoding: name.dropLast(tail.count), as: UTF8.self)
        }
        return item
    }

    private func stripped(_ result: ItemResult) -> ItemResult {
        var result = result
        result.item = stripped(result.item)
        return result
    }

    func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        stripped(try await inner.item(for: identifier))
    }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        var listed = try await inner.enumerateItems(in: container, startingAt: page)
        listed.items = listed.items.map(stripped)
        return listed
    }

    func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor {
        try await inner.currentSyncAnchor(for: container)
    }

    func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor) async throws(FileProviderError) -> ChangeSet {
        var changes = try await inner.enumerateChanges(in: container, from: anchor)
        changes.updatedItems = changes.updatedItems.map(stripped)
        return changes
    }

    func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        stripped(try await inner.fetchContents(for: identifier, version: version, to: destination, offset: offset, progress: progress))
    }

    func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        await inner.fetchContents(requests, progress: progress).map { $0.map(stripped) }
    }

    func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        var read = try await inner.fetchPartialContents(for: identifier, version: version, range: range, into: destination)
        read.item = stripped(read.item)
        return read
    }

    func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        var template = template
        template.filename = adding(to: template.filename, kind: template.kind)
        return stripped(try await inner.createItem(basedOn: template, fields: fields, contents: contents, options: options))
    }

    func modifyItem(_ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions)
        async throws(FileProviderError) -> ItemResult
    {
        var item = item
        item.filename = adding(to: item.filename, kind: item.kind)
        return stripped(
            try await inner.modifyItem(item, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options))
    }

    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions) async throws(FileProviderError) {
        try await inner.deleteItem(identifier: identifier, baseVersion: baseVersion, options: options)
    }

    func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError) -> Data {
        try await inner.fetchThumbnail(for: identifier, size: size)
    }

    func close() async { await inner.close() }
}
