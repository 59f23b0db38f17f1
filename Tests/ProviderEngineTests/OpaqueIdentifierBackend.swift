import Foundation
import ProviderCore
import ProviderTesting

/// A store whose identifiers are not paths (as Nextcloud's `oc:fileid`, an external backend's
/// own ids, an S3 version id), over a ``MemoryBackend``: an item gets an opaque identifier
/// (`n1`, `n2`, …) the first time it is seen, keeps it across renames and moves, and a new one
/// when it is replaced (``replace(path:data:)``: deleted, then made again under the same name).
final class OpaqueIdentifierBackend: Backend, @unchecked Sendable {
    let memory: MemoryBackend
    private let lock = NSLock()
    private var byPath: [String: String] = [:]
    private var byIdentifier: [String: String] = [:]
    private var next = 0
    /// Every listing hands out new identifiers (a store that lies about identity).
    var renewsEveryListing = false

    init(memory: MemoryBackend) { self.memory = memory }

    var capabilities: BackendCapabilities {
        var capabilities = memory.capabilities
        capabilities.identifiersArePathDerived = false
        return capabilities
    }

    // MARK: Changes another client makes

    /// Deletes the item at `path` and writes a new file there: the same name, a new identity.
    func replace(path: String, data: Data) throws {
        try memory.remove(path: path)
        forget(path)
        try memory.write(path: path, data: data)
    }

    /// Deletes the folder at `path` and makes a new one with `files` in it (names to contents).
    func replaceFolder(path: String, files: [String: Data]) throws {
        try memory.remove(path: path)
        forget(path)
        try memory.mkdir(path: path)
        for (name, data) in files { try memory.write(path: path + "/" + name, data: data) }
    }

    /// The identifier the item at `path` has now, `nil` when none was handed out.
    func identifier(of path: String) -> String? { lock.withLock { byPath[path] } }

    private func forget(_ path: String) {
        lock.withLock {
            for (known, identifier) in byPath where known == path || known.hasPrefix(path + "/") {
                byPath[known] = nil
                byIdentifier[identifier] = nil
            }
        }
    }

    // MARK: Translation

    private func path(of identifier: ItemIdentifier) throws(FileProviderError) -> ItemIdentifier {
        if identifier == .rootContainer { return identifier }
        guard let path = lock.withLock({ byIdentifier[identifier.rawValue] }) else { throw .noSuchItem(identifier) }
        return ItemIdentifier(path)
    }

    private func opaque(_ pathIdentifier: ItemIdentifier) -> ItemIdentifier {
        if pathIdentifier == .rootContainer { return pathIdentifier }
        let path = pathIdentifier.rawValue
        return lock.withLock {
            if let known = byPath[path] { return ItemIdentifier(known) }
            next += 1
            let identifier = "n\(next)"
            byPath[path] = identifier
            byIdentifier[identifier] = path
            return ItemIdentifier(identifier)
        }
    }

    private func outgoing(_ item: Item) -> Item {
        var item = item
        item.identifier = opaque(item.identifier)
        item.parentIdentifier = opaque(item.parentIdentifier)
        return item
    }

    /// Moves the identifiers of `from` and everything below it to `to` (a rename keeps them).
    private func moved(from: String, to: String) {
        lock.withLock {
            for (known, identifier) in byPath where known == from || known.hasPrefix(from + "/") {
                let now = to + known.dropFirst(from.count)
                byPath[known] = nil
                byPath[now] = identifier
                byIdentifier[identifier] = now
            }
        }
    }

    // MARK: Backend

    func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        outgoing(try await memory.item(for: try path(of: identifier)))
    }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        var result = try await memory.enumerateItems(in: try path(of: container), startingAt: page)
        if renewsEveryListing {
            for item in result.items { forget(item.identifier.rawValue) }
        }
        result.items = result.items.map(outgoing)
        return result
    }

    func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        outgoing(
            try await memory.fetchContents(
                for: try path(of: identifier), version: version, to: destination, offset: offset, progress: progress))
    }

    func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        var result = try await memory.fetchPartialContents(
            for: try path(of: identifier), version: version, range: range, into: destination)
        result.item = outgoing(result.item)
        return result
    }

    func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        var template = template
        template.parentIdentifier = try path(of: template.parentIdentifier)
        var result = try await memory.createItem(basedOn: template, fields: fields, contents: contents, options: options)
        result.item = outgoing(result.item)
        return result
    }

    func modifyItem(_ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions)
        async throws(FileProviderError) -> ItemResult
    {
        var asked = item
        let oldPath = try path(of: item.identifier)
        asked.identifier = oldPath
        asked.parentIdentifier = try path(of: item.parentIdentifier)
        var result = try await memory.modifyItem(
            asked, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options)
        if result.item.identifier != oldPath { moved(from: oldPath.rawValue, to: result.item.identifier.rawValue) }
        result.item = outgoing(result.item)
        return result
    }

    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions) async throws(FileProviderError) {
        let path = try path(of: identifier)
        try await memory.deleteItem(identifier: path, baseVersion: baseVersion, options: options)
        forget(path.rawValue)
    }

    func close() async {}
}
