import Foundation
import ProviderCore

extension MemoryBackend {
    private static let pagePrefix = Array("memory-after:".utf8)

    /// Returns the current metadata of one item.
    ///
    /// - Throws: `noSuchItem` when no item has that identifier; an injected failure.
    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        try await begin(.item, identifier)
        return try withTree { (tree) throws(FileProviderError) -> Item in
            try tree.existingItem(at: MemoryTree.key(for: identifier))
        }
    }

    /// Returns one page of a folder's children, sorted by the bytes of their names; the page
    /// token is the last name of the previous page.
    ///
    /// - Throws: `noSuchItem` when the folder does not exist; `invalidArgument` when it is not a
    ///   folder; `pageExpired` for a token this backend did not make; an injected failure.
    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page)
        async throws(FileProviderError) -> ItemPage
    {
        try await begin(.enumerateItems, container)
        var after: [UInt8]?
        if !page.isInitial {
            let raw = [UInt8](page.rawValue)
            guard raw.starts(with: Self.pagePrefix) else {
                throw FileProviderError(.pageExpired, "the page token was not made by the memory backend")
            }
            after = Array(raw.dropFirst(Self.pagePrefix.count))
        }
        let pageSize = self.pageSize
        return try withTree { [after] (tree) throws(FileProviderError) -> ItemPage in
            let key = try tree.folderKey(container)
            var names = tree.sortedChildNames(of: key)
            if let after { names = names.filter { after.lexicographicallyPrecedes($0) } }
            let slice = names.prefix(pageSize)
            let items = slice.compactMap { tree.item(at: MemoryTree.child($0, of: key)) }
            let next = names.count > pageSize ? slice.last.map { Page(Data(Self.pagePrefix + $0)) } : nil
            return ItemPage(items: items, nextPage: next)
        }
    }

    /// Returns the anchor of "now" in the change feed.
    ///
    /// - Throws: `notSupported` without a change feed; `noSuchItem` when the folder does not
    ///   exist; an injected failure.
    public func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor {
        try await begin(.currentSyncAnchor, container)
        guard capabilities.hasChangeFeed else { throw FileProviderError(.notSupported, "this store has no change feed") }
        return try withTree { (tree) throws(FileProviderError) -> SyncAnchor in
            if container != .workingSet { _ = try tree.folderKey(container) }
            return anchor(tree.sequence)
        }
    }

    /// Returns what changed since an anchor, in a folder's direct children or (for
    /// `.workingSet`) anywhere; items deleted are named by identifier.
    ///
    /// - Throws: `notSupported` without a change feed; `syncAnchorExpired` for an anchor of
    ///   another store, from the future, or older than the remembered log; an injected failure.
    public func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor)
        async throws(FileProviderError) -> ChangeSet
    {
        try await begin(.enumerateChanges, container)
        guard capabilities.hasChangeFeed else { throw FileProviderError(.notSupported, "this store has no change feed") }
        let batch = changeBatchSize
        return try withTree { (tree) throws(FileProviderError) -> ChangeSet in
            guard let start = sequence(of: anchor), start <= tree.sequence, start >= tree.oldestKnownSequence else {
                throw FileProviderError(.syncAnchorExpired, "the change feed no longer knows this anchor")
            }
            let folder: MemoryTree.Key? =
                container == .workingSet ? nil : try MemoryTree.key(for: container)
            let result = tree.changes(after: start, in: folder, limit: batch)
            return ChangeSet(
                updatedItems: result.updated, deletedIdentifiers: result.deleted, newAnchor: self.anchor(result.end),
                moreComing: result.more)
        }
    }

    private func anchor(_ sequence: UInt64) -> SyncAnchor {
        var data = withUnsafeBytes(of: epoch.uuid) { Data($0) }
        withUnsafeBytes(of: sequence.littleEndian) { data.append(contentsOf: $0) }
        return SyncAnchor(data)
    }

    private func sequence(of anchor: SyncAnchor) -> UInt64? {
        let epochBytes = withUnsafeBytes(of: epoch.uuid) { Data($0) }
        guard anchor.rawValue.count == 24, anchor.rawValue.prefix(16) == epochBytes else { return nil }
        return anchor.rawValue.suffix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * $1.offset) }
    }

    /// Writes a file's bytes into `destination`, resuming after `offset` bytes, reporting
    /// progress per MiB.
    ///
    /// - Throws: `noSuchItem` when the item is gone; `invalidArgument` for a folder or symlink;
    ///   `versionNoLongerAvailable` when `version` is not the current content version;
    ///   `localIOFailure` when `destination` cannot be written; an injected failure.
    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        try await begin(.fetchContents, identifier)
        let (item, data) = try withTree { (tree) throws(FileProviderError) -> (Item, Data) in
            let key = try MemoryTree.key(for: identifier)
            let item = try tree.existingItem(at: key)
            guard item.kind == .file, let node = tree.nodes[key] else {
                throw FileProviderError(.invalidArgument, "'\(identifier.rawValue)' is not a file")
            }
            if let version, version.content != item.version.content {
                throw FileProviderError(.versionNoLongerAvailable, "'\(identifier.rawValue)' changed; that version is gone")
            }
            return (item, node.data)
        }
        // Cancelling the task stops the copy between two MiB (as a real transfer stops).
        let flag = CancellationFlag()
        let sink = ContentSink.for(destination)
        try await withCancellationFlag(flag) { () async throws(FileProviderError) in
            try await executor.run { () throws -> Void in
                let start = offset > 0 && offset <= Int64(data.count) ? Int(offset) : 0
                do {
                    let handle = try FileHandle(forWritingTo: destination)
                    defer { try? handle.close() }
                    try handle.truncate(atOffset: UInt64(start))
                    try handle.seek(toOffset: UInt64(start))
                    progress?(Int64(start), Int64(data.count))
                    var position = start
                    while position < data.count {
                        try flag.check()
                        let end = min(data.count, position + (1 << 20))
                        try handle.write(contentsOf: data[position..<end])
                        data[position..<end].withUnsafeBytes { sink?.consume($0, at: Int64(position)) }
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
        let start = offset > 0 && offset <= Int64(data.count) ? offset : 0
        countServed(Int64(data.count) - start, by: .fetchContents)
        return item
    }

    /// Writes bytes `range` of a file (clamped to its size) into `destination` at the same
    /// offsets, without truncating it; counts them in ``bytesServed(by:)``.
    ///
    /// - Throws: `invalidArgument` for a folder or symlink, or an empty range or one starting
    ///   below 0; `noSuchItem` when the item is gone; `versionNoLongerAvailable` when `version`
    ///   is not the current content version; `localIOFailure` when `destination` cannot be
    ///   opened or written; an injected failure.
    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try await begin(.fetchPartialContents, identifier)
        try PartialContents.validate(range)
        let (item, data) = try withTree { (tree) throws(FileProviderError) -> (Item, Data) in
            let key = try MemoryTree.key(for: identifier)
            let item = try tree.existingItem(at: key)
            guard item.kind == .file, let node = tree.nodes[key] else {
                throw FileProviderError(.invalidArgument, "'\(identifier.rawValue)' is not a file")
            }
            if version.content != item.version.content {
                throw FileProviderError(.versionNoLongerAvailable, "'\(identifier.rawValue)' changed; that version is gone")
            }
            return (item, node.data)
        }
        let written = PartialContents.clamp(range, toSize: item.size)
        let sink = ContentSink.for(destination)
        if !written.isEmpty {
            try await executor.run { () throws -> Void in
                do {
                    let handle = try FileHandle(forWritingTo: destination)
                    defer { try? handle.close() }
                    try handle.seek(toOffset: UInt64(written.lowerBound))
                    let start = data.startIndex + Int(written.lowerBound)
                    try handle.write(contentsOf: data[start..<(start + written.count)])
                    data[start..<(start + written.count)].withUnsafeBytes { sink?.consume($0, at: written.lowerBound) }
                } catch {
                    throw FileProviderError.wrap(error, as: .localIOFailure, context: "writing \(destination.path)")
                }
            }
            countServed(Int64(written.count), by: .fetchPartialContents)
        }
        return PartialContents(item: item, range: written)
    }

    /// Creates an item from a template.
    ///
    /// - Throws: `invalidFilename` for an unsafe name; `noSuchItem` when the parent does not
    ///   exist; `invalidArgument` when it is not a folder or a symlink has no target;
    ///   `filenameCollision` when the name is taken (with `mayAlreadyExist`, only by an item of
    ///   another kind: an item of the same kind is returned, a file's contents replaced by the
    ///   template's); `notSupported` for a kind not in ``BackendCapabilities/creatableKinds``
    ///   and for contents over ``BackendCapabilities/maximumUploadSize``; `localIOFailure` when
    ///   `contents` cannot be read; an injected failure.
    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        try await begin(.createItem, template.identifier)
        guard capabilities.creatableKinds.contains(template.kind) else {
            throw FileProviderError(.notSupported, "this store cannot create a \(template.kind.rawValue)")
        }
        let data = try await read(contents)
        try checkUploadSize(data)
        return try withTree { (tree) throws(FileProviderError) -> ItemResult in
            let parent = try tree.folderKey(template.parentIdentifier)
            let key = try MemoryTree.childKey(named: template.filename, in: parent)
            if template.kind == .symlink && (template.symlinkTargetPath ?? "").isEmpty {
                throw FileProviderError(.invalidArgument, "a symlink needs a target path")
            }
            if let existing = tree.nodes[key] {
                guard options.contains(.mayAlreadyExist), existing.kind == template.kind else {
                    throw FileProviderError(
                        .filenameCollision, "an item named \(template.filename.debugDescription) already exists")
                }
                if template.kind == .file && existing.data != data {
                    tree.setContents(key, data: data, date: template.contentModificationDate)
                } else if template.kind == .symlink, let target = template.symlinkTargetPath,
                    !(existing.symlinkTarget ?? "").utf8.elementsEqual(target.utf8)
                {
                    tree.setContents(key, data: Data(), target: target, date: template.contentModificationDate)
                }
            } else {
                tree.insert(
                    key, kind: template.kind, data: template.kind == .file ? data : Data(),
                    target: template.kind == .symlink ? template.symlinkTargetPath : nil,
                    date: template.contentModificationDate)
            }
            return ItemResult(item: try tree.existingItem(at: key))
        }
    }

    /// Changes an item's contents or date, renames or moves it; the version check and the
    /// change are one atomic step.
    ///
    /// - Throws: `noSuchItem` when the item or the new parent is gone; `versionOutOfDate` when
    ///   the item's version is not `baseVersion`; `notSupported` for contents over
    ///   ``BackendCapabilities/maximumUploadSize``; `filenameCollision` when the new name is
    ///   taken; `invalidFilename` for an unsafe name; `invalidArgument` for contents on a
    ///   non-file, renaming the root or moving a folder into itself; an injected failure.
    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?,
        options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        try await begin(.modifyItem, item.identifier)
        let data = changedFields.contains(.contents) ? try await read(contents) : Data()
        try checkUploadSize(data)
        return try withTree { (tree) throws(FileProviderError) -> ItemResult in
            var key = try MemoryTree.key(for: item.identifier)
            let current = try tree.existingItem(at: key)
            guard current.version == baseVersion else { throw .versionOutOfDate(item.identifier) }
            let renames = changedFields.contains(.filename) || changedFields.contains(.parentItemIdentifier)
            var newKey = key
            if renames {
                if key.isEmpty { throw FileProviderError(.invalidArgument, "the root cannot be renamed or moved") }
                if !capabilities.supportsServerSideMove {
                    throw FileProviderError(.notSupported, "this store cannot rename or move items")
                }
                let parent =
                    changedFields.contains(.parentItemIdentifier)
                    ? try tree.folderKey(item.parentIdentifier) : MemoryTree.parent(of: key)
                let name = changedFields.contains(.filename) ? item.filename : String(decoding: MemoryTree.name(of: key), as: UTF8.self)
                newKey = try MemoryTree.childKey(named: name, in: parent)
                if newKey != key {
                    if parent == key || parent.starts(with: key + [MemoryTree.slash]) {
                        throw FileProviderError(.invalidArgument, "a folder cannot move into itself")
                    }
                    if tree.nodes[newKey] != nil {
                        throw FileProviderError(.filenameCollision, "an item named \(name.debugDescription) already exists")
                    }
                }
            }
            if changedFields.contains(.contents) {
                guard current.kind == .file else {
                    throw FileProviderError(.invalidArgument, "'\(item.identifier.rawValue)' is not a file")
                }
                tree.setContents(key, data: data, date: item.contentModificationDate)
            } else if changedFields.contains(.contentModificationDate), let date = item.contentModificationDate {
                tree.setModificationDate(key, date)
            }
            if newKey != key {
                tree.move(key, to: newKey)
                key = newKey
            }
            return ItemResult(item: try tree.existingItem(at: key))
        }
    }

    /// Deletes an item (a folder with everything in it when `recursive`).
    ///
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when its version is not
    ///   `baseVersion`; `directoryNotEmpty` for a non-empty folder without `recursive`;
    ///   `deletionRejected` for the root; an injected failure.
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        try await begin(.deleteItem, identifier)
        try withTree { (tree) throws(FileProviderError) in
            let key = try MemoryTree.key(for: identifier)
            if key.isEmpty { throw FileProviderError(.deletionRejected, "the root cannot be deleted") }
            let current = try tree.existingItem(at: key)
            if let baseVersion, baseVersion != current.version { throw .versionOutOfDate(identifier) }
            if current.kind == .folder && !options.contains(.recursive) && !(tree.children[key] ?? []).isEmpty {
                throw FileProviderError(.directoryNotEmpty, "'\(identifier.rawValue)' is not empty")
            }
            tree.remove(key)
        }
    }

    /// Thumbnails are not supported.
    ///
    /// - Throws: `notSupported`, or an injected failure.
    public func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError) -> Data {
        try await begin(.fetchThumbnail, identifier)
        throw FileProviderError(.notSupported, "the memory backend has no thumbnails")
    }

    /// Refuses an upload over ``BackendCapabilities/maximumUploadSize`` (after reading it, as a
    /// server that refuses a body once received).
    /// - Throws: `notSupported` for a file over the limit.
    private func checkUploadSize(_ data: Data) throws(FileProviderError) {
        if let limit = capabilities.maximumUploadSize, Int64(data.count) > limit {
            throw FileProviderError(.notSupported, "this store accepts files up to \(limit) bytes; this one has \(data.count)")
        }
    }

    /// Reads an upload on the backend's threads.
    private func read(_ contents: URL?) async throws(FileProviderError) -> Data {
        guard let contents else { return Data() }
        let sink = ContentSink.for(contents)
        return try await executor.run { () throws -> Data in
            do {
                let data = try Data(contentsOf: contents)
                data.withUnsafeBytes { sink?.consume($0, at: 0) }
                return data
            } catch {
                throw FileProviderError.wrap(error, as: .localIOFailure, context: "reading \(contents.path)")
            }
        }
    }
}
