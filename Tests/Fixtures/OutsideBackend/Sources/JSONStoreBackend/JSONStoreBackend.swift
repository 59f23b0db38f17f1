import Foundation
import ProviderCore

/// A store kept in one JSON file: every item with its contents. Small on purpose: it shows what
/// a backend in a package of its own needs (ProviderCore only) and passes `BackendConformance`.
///
/// Identifiers are the items' paths (the root is ``ItemIdentifier/rootContainer``), so a rename
/// or move gives a new identifier (`identifiersArePathDerived`). Every call reads the file and
/// every change writes it again (atomically), on the backend's own threads, never on Swift's
/// cooperative pool. No change feed, no ranged reads, no thumbnails, no symlinks: the protocol's
/// defaults decline those with `notSupported`.
public final class JSONStoreBackend: Backend, @unchecked Sendable {
    /// The store file.
    public let file: URL
    public let capabilities = BackendCapabilities(supportsServerSideMove: true, supportsConditionalWrites: true)
    let pageSize: Int
    let executor = BlockingExecutor(name: "json-store", threads: 2)
    /// One change at a time in this process (read, change, write back).
    let lock = NSLock()

    /// The `jsonstore` kind: one option, the store file.
    public static let descriptor = BackendDescriptor(
        kind: "jsonstore", summary: "a store kept in one JSON file",
        options: [
            BackendOption(
                name: "file", help: "the JSON file holding the store (made when missing)", type: .path, isRequired: true,
                isStoreLocation: true)
        ],
        factory: { configuration in try JSONStoreBackend(file: URL(fileURLWithPath: try configuration.string("file"))) })

    /// Opens (or creates) a store file.
    /// - Throws: `localIOFailure` when the file cannot be created or read; `corruptData` when it
    ///   is not a store.
    public init(file: URL, pageSize: Int = 500) throws(FileProviderError) {
        self.file = file
        self.pageSize = max(1, pageSize)
        if !FileManager.default.fileExists(atPath: file.path) { try Self.save(Store(), to: file) }
        _ = try Self.load(file)
    }

    public func close() async { executor.shutDown() }

    // MARK: The file

    struct Entry: Codable {
        var path: Data
        var isFolder: Bool
        var contents: Data
        var created: Date
        var modified: Date
        var contentVersion: UInt64
        var metadataVersion: UInt64
    }

    struct Store: Codable {
        var counter: UInt64 = 1
        var entries: [Entry] = [
            Entry(path: Data(), isFolder: true, contents: Data(), created: Date(), modified: Date(), contentVersion: 1, metadataVersion: 1)
        ]

        mutating func next() -> UInt64 {
            counter += 1
            return counter
        }
    }

    static func load(_ file: URL) throws(FileProviderError) -> Store {
        let data: Data
        do { data = try Data(contentsOf: file) } catch { throw .wrap(error, as: .localIOFailure, context: "reading \(file.path)") }
        do { return try JSONDecoder().decode(Store.self, from: data) } catch {
            throw FileProviderError(.corruptData, "\(file.path) is not a JSON store: \(error)")
        }
    }

    static func save(_ store: Store, to file: URL) throws(FileProviderError) {
        do { try JSONEncoder().encode(store).write(to: file, options: .atomic) } catch {
            throw .wrap(error, as: .localIOFailure, context: "writing \(file.path)")
        }
    }

    /// Runs `body` over the store on the backend's threads; writes the store back when `body`
    /// changed it.
    func withStore<T: Sendable>(changing: Bool = false, _ body: @escaping @Sendable (inout [Data: Entry], inout Store) throws -> T)
        async throws(FileProviderError) -> T
    {
        let file = self.file
        let lock = self.lock
        return try await executor.run { () throws -> T in
            try lock.withLock { () throws -> T in
                var store = try Self.load(file)
                var entries = Dictionary(store.entries.map { ($0.path, $0) }) { first, _ in first }
                let result = try body(&entries, &store)
                if changing {
                    store.entries = Array(entries.values)
                    try Self.save(store, to: file)
                }
                return result
            }
        }
    }

    // MARK: Paths and items

    static func path(of identifier: ItemIdentifier) -> Data {
        identifier == .rootContainer ? Data() : Data(identifier.rawValue.utf8)
    }

    static func parent(of path: Data) -> Data {
        guard let slash = path.lastIndex(of: UInt8(ascii: "/")) else { return Data() }
        return Data(path[path.startIndex..<slash])
    }

    static func name(of path: Data) -> Data {
        guard let slash = path.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return Data(path[(slash + 1)...])
    }

    static func child(_ name: String, of folder: Data) -> Data {
        folder.isEmpty ? Data(name.utf8) : folder + Data("/".utf8) + Data(name.utf8)
    }

    static func identifier(of path: Data) -> ItemIdentifier {
        path.isEmpty ? .rootContainer : ItemIdentifier(String(decoding: path, as: UTF8.self))
    }

    static func isInside(_ path: Data, _ folder: Data) -> Bool {
        folder.isEmpty ? !path.isEmpty : path.starts(with: folder + Data("/".utf8))
    }

    static func item(_ entry: Entry) -> Item {
        let version = ItemVersion(
            content: Data("c\(entry.contentVersion)".utf8), metadata: Data("m\(entry.metadataVersion)".utf8))
        return Item(
            identifier: identifier(of: entry.path),
            parentIdentifier: entry.path.isEmpty ? .rootContainer : identifier(of: parent(of: entry.path)),
            filename: entry.path.isEmpty ? "" : String(decoding: name(of: entry.path), as: UTF8.self),
            kind: entry.isFolder ? .folder : .file, size: Int64(entry.contents.count), creationDate: entry.created,
            contentModificationDate: entry.modified, version: version)
    }

    static func existing(_ identifier: ItemIdentifier, in entries: [Data: Entry]) throws(FileProviderError) -> Entry {
        guard let entry = entries[path(of: identifier)] else { throw FileProviderError.noSuchItem(identifier) }
        return entry
    }

    static func folder(_ identifier: ItemIdentifier, in entries: [Data: Entry]) throws(FileProviderError) -> Data {
        let entry = try existing(identifier, in: entries)
        guard entry.isFolder else { throw FileProviderError(.invalidArgument, "'\(identifier.rawValue)' is not a folder") }
        return entry.path
    }

    /// Reads an upload (on the backend's threads).
    func read(_ contents: URL?) async throws(FileProviderError) -> Data {
        guard let contents else { return Data() }
        return try await executor.run { () throws -> Data in
            do { return try Data(contentsOf: contents) } catch {
                throw FileProviderError.wrap(error, as: .localIOFailure, context: "reading \(contents.path)")
            }
        }
    }

    // MARK: Backend

    /// - Throws: `noSuchItem` when no item has that identifier.
    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        try await withStore { entries, _ in Self.item(try Self.existing(identifier, in: entries)) }
    }

    private static let pagePrefix = Data("after:".utf8)

    /// Children sorted by the bytes of their names; a page token is the last name of the page before.
    /// - Throws: `noSuchItem` for a missing folder; `invalidArgument` for a file; `pageExpired`
    ///   for a token this backend did not make.
    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        var after: Data?
        if !page.isInitial {
            guard page.rawValue.starts(with: Self.pagePrefix) else {
                throw FileProviderError(.pageExpired, "the page token was not made by the JSON store")
            }
            after = Data(page.rawValue.dropFirst(Self.pagePrefix.count))
        }
        let pageSize = self.pageSize
        return try await withStore { [after] entries, _ in
            let folder = try Self.folder(container, in: entries)
            var children = entries.values.filter { !$0.path.isEmpty && Self.parent(of: $0.path) == folder }
                .sorted { Self.name(of: $0.path).lexicographicallyPrecedes(Self.name(of: $1.path)) }
            if let after { children = children.filter { after.lexicographicallyPrecedes(Self.name(of: $0.path)) } }
            let slice = children.prefix(pageSize)
            let next = children.count > pageSize ? slice.last.map { Page(Self.pagePrefix + Self.name(of: $0.path)) } : nil
            return ItemPage(items: slice.map(Self.item), nextPage: next)
        }
    }

    /// Writes the whole file (no ranged reads: `offset` is not honoured, the file is rewritten),
    /// 1 MiB at a time, checking for cancellation between chunks.
    /// - Throws: `noSuchItem`; `invalidArgument` for a folder; `versionNoLongerAvailable` when
    ///   `version` is not the current content version; `cancelled`; `localIOFailure` when
    ///   `destination` cannot be written.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let (item, data) = try await withStore { entries, _ in
            let entry = try Self.existing(identifier, in: entries)
            guard !entry.isFolder else { throw FileProviderError(.invalidArgument, "'\(identifier.rawValue)' is not a file") }
            let item = Self.item(entry)
            if let version, version.content != item.version.content {
                throw FileProviderError(.versionNoLongerAvailable, "'\(identifier.rawValue)' changed; that version is gone")
            }
            return (item, entry.contents)
        }
        let flag = CancellationFlag()
        try await withCancellationFlag(flag) { () async throws(FileProviderError) in
            try await executor.run { () throws -> Void in
                do {
                    let handle = try FileHandle(forWritingTo: destination)
                    defer { try? handle.close() }
                    try handle.truncate(atOffset: 0)
                    var position = 0
                    progress?(0, Int64(data.count))
                    while position < data.count {
                        try flag.check()
                        let end = min(data.count, position + (1 << 20))
                        try handle.write(contentsOf: data[position..<end])
                        position = end
                        progress?(Int64(position), Int64(data.count))
                    }
                } catch let error as FileProviderError {
                    throw error
                } catch {
                    throw FileProviderError.wrap(error, as: .localIOFailure, context: "writing \(destination.path)")
                }
            }
        }
        return item
    }

    /// - Throws: `invalidFilename` for an unsafe name; `notSupported` for a symlink;
    ///   `noSuchItem` for a missing parent; `invalidArgument` when the parent is a file;
    ///   `filenameCollision` when the name is taken (with `mayAlreadyExist`, only by an item of
    ///   another kind: one of the same kind is returned, a file's contents replaced).
    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        try Filename.validate(template.filename)
        guard template.kind == .file || template.kind == .folder else {
            throw FileProviderError(.notSupported, "the JSON store holds files and folders only")
        }
        let data = template.kind == .file ? try await read(contents) : Data()
        return try await withStore(changing: true) { entries, store in
            let parent = try Self.folder(template.parentIdentifier, in: entries)
            let path = Self.child(template.filename, of: parent)
            let now = Date()
            if var existing = entries[path] {
                guard options.contains(.mayAlreadyExist), existing.isFolder == (template.kind == .folder) else {
                    throw FileProviderError(.filenameCollision, "an item named \(template.filename.debugDescription) already exists")
                }
                if !existing.isFolder && existing.contents != data {
                    existing.contents = data
                    existing.modified = template.contentModificationDate ?? now
                    existing.contentVersion = store.next()
                    existing.metadataVersion = store.next()
                    entries[path] = existing
                }
                return ItemResult(item: Self.item(existing))
            }
            let version = store.next()
            let entry = Entry(
                path: path, isFolder: template.kind == .folder, contents: data, created: template.creationDate ?? now,
                modified: template.contentModificationDate ?? now, contentVersion: version, metadataVersion: version)
            entries[path] = entry
            return ItemResult(item: Self.item(entry))
        }
    }

    /// Changes contents or the modification date, renames or moves (a folder with everything in
    /// it); the version check and the change happen under one lock.
    /// - Throws: `noSuchItem`; `versionOutOfDate` when the item's version is not `baseVersion`;
    ///   `invalidFilename`; `filenameCollision` when the new name is taken; `invalidArgument`
    ///   for contents on a folder, renaming the root or moving a folder into itself.
    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        let renames = changedFields.contains(.filename) || changedFields.contains(.parentItemIdentifier)
        if renames { try Filename.validate(item.filename) }
        let data = changedFields.contains(.contents) ? try await read(contents) : Data()
        return try await withStore(changing: true) { entries, store in
            var entry = try Self.existing(item.identifier, in: entries)
            guard Self.item(entry).version == baseVersion else { throw FileProviderError.versionOutOfDate(item.identifier) }
            var newPath = entry.path
            if renames {
                if entry.path.isEmpty { throw FileProviderError(.invalidArgument, "the root cannot be renamed or moved") }
                let parent =
                    changedFields.contains(.parentItemIdentifier)
                    ? try Self.folder(item.parentIdentifier, in: entries) : Self.parent(of: entry.path)
                let name = changedFields.contains(.filename) ? item.filename : String(decoding: Self.name(of: entry.path), as: UTF8.self)
                newPath = Self.child(name, of: parent)
                if newPath != entry.path {
                    if parent == entry.path || Self.isInside(parent, entry.path) {
                        throw FileProviderError(.invalidArgument, "a folder cannot move into itself")
                    }
                    if entries[newPath] != nil {
                        throw FileProviderError(.filenameCollision, "an item named \(name.debugDescription) already exists")
                    }
                }
            }
            if changedFields.contains(.contents) {
                guard !entry.isFolder else { throw FileProviderError(.invalidArgument, "'\(item.identifier.rawValue)' is not a file") }
                entry.contents = data
                entry.modified = item.contentModificationDate ?? Date()
                entry.contentVersion = store.next()
                entry.metadataVersion = store.next()
            } else if changedFields.contains(.contentModificationDate), let date = item.contentModificationDate {
                entry.modified = date
                entry.metadataVersion = store.next()
            }
            if newPath != entry.path {
                let old = entry.path
                for descendant in entries.values where Self.isInside(descendant.path, old) {
                    var moved = descendant
                    entries[descendant.path] = nil
                    moved.path = newPath + descendant.path.dropFirst(old.count)
                    entries[moved.path] = moved
                }
                entries[old] = nil
                entry.path = newPath
                entry.metadataVersion = store.next()
            }
            entries[entry.path] = entry
            return ItemResult(item: Self.item(entry))
        }
    }

    /// - Throws: `deletionRejected` for the root; `noSuchItem`; `versionOutOfDate` when its
    ///   version is not `baseVersion`; `directoryNotEmpty` for a folder with items without
    ///   `recursive`.
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        try await withStore(changing: true) { entries, _ in
            let entry = try Self.existing(identifier, in: entries)
            if entry.path.isEmpty { throw FileProviderError(.deletionRejected, "the root cannot be deleted") }
            if let baseVersion, baseVersion != Self.item(entry).version { throw FileProviderError.versionOutOfDate(identifier) }
            let inside = entries.keys.filter { Self.isInside($0, entry.path) }
            if entry.isFolder && !inside.isEmpty && !options.contains(.recursive) {
                throw FileProviderError(.directoryNotEmpty, "'\(identifier.rawValue)' is not empty")
            }
            for path in inside { entries[path] = nil }
            entries[entry.path] = nil
        }
    }
}
