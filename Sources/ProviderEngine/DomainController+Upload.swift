import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// The parent path and name of a relative path.
    static func split(_ path: String) -> (parent: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("", path) }
        return (String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    /// Sends local changes in the replica to the store (sync up): creations, edits, moves and
    /// deletions, each written to the journal before it runs and marked done after.
    ///
    /// Conflicts keep both versions and are logged. One bad item never stops the rest.
    /// - Throws: the error of the first operation whose code makes the whole domain back off
    ///   (`serverUnreachable`, `notAuthenticated`, `insufficientQuota`); the rest waits for the
    ///   next sync. `localIOFailure` when the database fails.
    func push(report: inout SyncReport, settleSeconds: Double) async throws(FileProviderError) {
        let started = Date()
        defer { report.phases.upload += Date().timeIntervalSince(started) }
        for _ in 0..<3 {
            let records = try store.allItems(domainID: domainID)
            let scanner = LocalScanner(replica: replica, ignore: ignoreRules, settleNanos: Int64(settleSeconds * 1e9))
            let result = try await executor.run { scanner.scan(records: records) }
            report.pendingLocal = result.unsettled
            if result.changes.isEmpty { break }
            let ordered = Self.order(result.changes)
            var changedFolderTree = false
            for change in ordered {
                do {
                    try await upload(change, report: &report)
                    if case .moved(let record, _, _) = change, record.kind == .folder { changedFolderTree = true }
                } catch where error.code.reaction == .backOffDomain {
                    throw error
                } catch {
                    report.notices.append("\(display(change.path)): not uploaded: \(error.message)")
                    if var record = try? store.item(domainID: domainID, path: change.path) {
                        record.lastError = error.message
                        try? store.save(record)
                    }
                }
            }
            try? store.pruneJournal(domainID: domainID)
            // A moved folder re-keys everything below it: scan again for edits made inside it.
            if !changedFolderTree { break }
        }
    }

    /// New folders first (parents first), then moves, new files, edits, and deletions.
    static func order(_ changes: [LocalChange]) -> [LocalChange] {
        func rank(_ change: LocalChange) -> Int {
            switch change {
            case .created(_, .folder, _): return 0
            case .moved: return 1
            case .created: return 2
            case .modified: return 3
            case .deleted: return 4
            }
        }
        return changes.enumerated().sorted { a, b in
            let (ra, rb) = (rank(a.element), rank(b.element))
            if ra != rb { return ra < rb }
            if ra == 0 || ra == 1 { return a.element.path < b.element.path }
            return a.offset < b.offset
        }.map(\.element)
    }

    private func upload(_ change: LocalChange, report: inout SyncReport) async throws(FileProviderError) {
        switch change {
        case .created(let path, let kind, let fingerprint):
            try await uploadCreation(path: path, kind: kind, fingerprint: fingerprint, report: &report)
        case .modified(let record, let fingerprint):
            try await uploadEdit(record, fingerprint: fingerprint, report: &report)
        case .moved(let record, let to, let fingerprint):
            try await uploadMove(record, to: to, fingerprint: fingerprint, report: &report)
        case .deleted(let record):
            try await uploadDeletion(record, report: &report)
        }
    }

    // MARK: Journal

    private func journalled<T>(_ operation: String, _ key: String, payload: [String: String], _ body: (Bool) async throws -> T)
        async throws(FileProviderError) -> T
    {
        let template = "\(operation):\(key)"
        let replay = try store.unfinishedOperation(domainID: domainID, templateIdentifier: template)
        var entry = replay ?? JournalEntry(domainID: domainID, templateIdentifier: template, operation: operation, payload: Self.json(payload))
        entry.state = .running
        entry.attempts += 1
        if entry.id == nil { entry = try store.journal(entry) } else { try store.updateJournal(entry) }
        do {
            let value = try await body(replay != nil)
            entry.state = .done
            entry.lastError = nil
            try store.updateJournal(entry)
            return value
        } catch {
            let error = FileProviderError.wrap(error)
            entry.state = error.code.reaction == .reportToUser ? .failed : .pending
            entry.lastError = error.message
            try? store.updateJournal(entry)
            throw error
        }
    }

    private static func json(_ payload: [String: String]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: Creations

    private func uploadCreation(path: String, kind: ItemKind, fingerprint: FileFingerprint, report: inout SyncReport)
        async throws(FileProviderError)
    {
        let (parentPath, name) = Self.split(path)
        guard let parent = try store.item(domainID: domainID, path: parentPath), parent.kind == .folder else {
            throw FileProviderError(.noSuchItem, "its folder \(display(parentPath)) is not in the store yet; it will be retried")
        }
        let template = Item.template(
            identifier: ItemIdentifier("local:\(path)"), parent: parent.identifier, filename: name, kind: kind,
            size: kind == .file ? fingerprint.size : 0,
            contentModificationDate: Date(timeIntervalSince1970: Double(fingerprint.modificationNanos) / 1e9))
        let contents = kind == .file ? replica.url(path) : nil
        let result: ItemResult
        do {
            result = try await journalled("create", path, payload: ["path": path, "kind": kind.rawValue]) { replay in
                try await backend.createItem(
                    basedOn: template, fields: [.contents, .filename, .parentItemIdentifier, .contentModificationDate],
                    contents: contents, options: replay ? [.mayAlreadyExist] : [])
            }
        } catch where error.code == .filenameCollision {
            // The name is taken in the store: the later item gets `name 2.ext`.
            let renamed = try await renameLocally(path, kind: kind) { ConflictName.numbered(name, $0) }
            try store.recordConflict(
                ConflictRecord(domainID: domainID, path: path, keptPath: renamed, kind: "nameCollision",
                               details: "a new local item took a name the store already had; it was renamed"))
            report.conflicts += 1
            report.notices.append("\(display(path)): the name was taken in the store; uploaded as \(display(renamed))")
            guard let print = replica.fingerprint(atPath: replica.path(renamed)) else { return }
            try await uploadCreation(path: renamed, kind: kind, fingerprint: print, report: &report)
            return
        }
        var record = ItemRecord(domainID: domainID, item: result.item, path: path)
        record.parentIdentifier = parent.identifier
        record.localInode = fingerprint.inode
        if kind == .file {
            record.state = .materialized
            record.localContentVersion = result.shouldFetchContent ? nil : result.item.version.content
            record.localSize = fingerprint.size
            record.localModificationNanos = fingerprint.modificationNanos
        }
        try store.save(record)
        report.uploaded += 1
    }

    /// Renames a local item to the first free name `makeName(2)`, `makeName(3)`, …; returns the new path.
    private func renameLocally(_ path: String, kind: ItemKind, makeName: @escaping @Sendable (Int) -> String) async throws(FileProviderError) -> String {
        let (parentPath, _) = Self.split(path)
        let replica = self.replica
        let domainID = self.domainID
        let store = self.store
        return try await executor.run {
            for attempt in 2..<1000 {
                let candidate = parentPath.isEmpty ? makeName(attempt) : parentPath + "/" + makeName(attempt)
                if replica.fingerprint(atPath: replica.path(candidate)) != nil { continue }
                if replica.fingerprint(atPath: replica.placeholderPath(candidate)) != nil { continue }
                if try store.item(domainID: domainID, path: candidate) != nil { continue }
                try replica.move(fromPath: replica.path(path), toPath: replica.path(candidate))
                return candidate
            }
            throw FileProviderError(.filenameCollision, "no free name for \(path)")
        }
    }

    // MARK: Edits

    private func uploadEdit(_ record: ItemRecord, fingerprint: FileFingerprint, report: inout SyncReport) async throws(FileProviderError) {
        var item = record.item
        item.size = fingerprint.size
        item.contentModificationDate = Date(timeIntervalSince1970: Double(fingerprint.modificationNanos) / 1e9)
        let contents = replica.url(record.path)
        let result: ItemResult
        do {
            result = try await journalled("modify", record.identifier.rawValue, payload: ["path": record.path]) { replay in
                try await backend.modifyItem(
                    item, baseVersion: record.version, changedFields: [.contents, .contentModificationDate], contents: contents,
                    options: replay ? [.mayAlreadyExist] : [])
            }
        } catch where error.code == .versionOutOfDate {
            try await keepBoth(record, report: &report)
            return
        } catch where error.code == .noSuchItem {
            // Edited here, deleted in the store: the edit wins and the item is created again.
            try store.apply(domainID: domainID, upserts: [], deletions: [record.identifier])
            try store.recordConflict(
                ConflictRecord(domainID: domainID, path: record.path, keptPath: nil, kind: "editedAndDeleted",
                               details: "edited here and deleted in the store; uploaded again"))
            report.conflicts += 1
            try await uploadCreation(path: record.path, kind: .file, fingerprint: fingerprint, report: &report)
            return
        }
        var updated = record
        updated.update(from: result.item, path: record.path)
        updated.state = .materialized
        updated.localContentVersion = result.shouldFetchContent ? nil : result.item.version.content
        updated.localSize = fingerprint.size
        updated.localModificationNanos = fingerprint.modificationNanos
        updated.localInode = fingerprint.inode
        updated.lastError = nil
        if record.state == .placeholder {
            try await executor.run { [replica] in try replica.removeFile(atPath: replica.placeholderPath(record.path)) }
        }
        try store.save(updated)
        report.uploaded += 1
    }

    /// Both sides edited a file: the store's version takes the name, the local one becomes a
    /// conflicted copy and is uploaded as a new item. Nothing is lost.
    private func keepBoth(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        let (_, name) = Self.split(record.path)
        let copyName = ConflictName.conflictedCopy(of: name)
        let copyPath = try await renameLocally(record.path, kind: .file) { attempt in
            attempt == 2 ? copyName : ConflictName.numbered(copyName, attempt - 1)
        }
        try store.recordConflict(
            ConflictRecord(domainID: domainID, path: record.path, keptPath: copyPath, kind: "bothEdited",
                           details: "edited here and in the store; the local version was kept as a conflicted copy"))
        report.conflicts += 1
        report.notices.append("\(display(record.path)): edited on both sides; your version is \(display(copyPath))")
        // The original name now holds the store's version.
        let current = try await backend.item(for: record.identifier)
        var original = record
        original.update(from: current, path: record.path)
        original.state = .placeholder
        original.localContentVersion = nil
        original.localSize = nil
        original.localModificationNanos = nil
        original.localInode = nil
        let metadata = PlaceholderMetadata(domain: domain.name, record: original)
        try await executor.run { [replica, original] in try replica.writePlaceholder(original.path, metadata) }
        try store.save(original)
        if let print = replica.fingerprint(atPath: replica.path(copyPath)) {
            try await uploadCreation(path: copyPath, kind: .file, fingerprint: print, report: &report)
        }
        for outcome in await download([original], events: nil) where outcome.error != nil {
            report.notices.append("\(outcome.path): not downloaded: \(outcome.error!.message)")
        }
    }

    // MARK: Moves

    private func uploadMove(_ record: ItemRecord, to path: String, fingerprint: FileFingerprint?, report: inout SyncReport)
        async throws(FileProviderError)
    {
        let (parentPath, name) = Self.split(path)
        guard let parent = try store.item(domainID: domainID, path: parentPath), parent.kind == .folder else {
            throw FileProviderError(.noSuchItem, "its new folder \(display(parentPath)) is not in the store yet; it will be retried")
        }
        var item = record.item
        item.filename = name
        item.parentIdentifier = parent.identifier
        let result: ItemResult
        do {
            result = try await journalled("move", record.identifier.rawValue, payload: ["from": record.path, "to": path]) { _ in
                try await backend.modifyItem(
                    item, baseVersion: record.version, changedFields: [.filename, .parentItemIdentifier], contents: nil, options: [])
            }
        } catch where error.code == .noSuchItem {
            // Moved here, deleted in the store.
            try store.deleteSubtree(domainID: domainID, path: record.path)
            if record.state == .placeholder || record.state == .symlink {
                try await executor.run { [replica] in try replica.removeFile(atPath: replica.placeholderPath(path)) }
                return
            }
            if let fingerprint {
                try await uploadCreation(path: path, kind: record.kind == .folder ? .folder : .file, fingerprint: fingerprint, report: &report)
            }
            return
        }
        if record.kind == .folder {
            try await rekeyFolder(from: record.path, to: path, folder: result.item, parent: parent.identifier, inode: fingerprint?.inode)
        } else {
            var moved = record
            moved.update(from: result.item, path: path)
            moved.parentIdentifier = parent.identifier
            if let fingerprint, moved.state == .materialized { moved.localInode = fingerprint.inode }
            try store.apply(domainID: domainID, upserts: [moved], deletions: record.identifier == moved.identifier ? [] : [record.identifier])
            if moved.state == .placeholder || moved.state == .symlink {
                let metadata = PlaceholderMetadata(domain: domain.name, record: moved)
                try await executor.run { [replica] in try replica.writePlaceholder(path, metadata) }
            }
        }
        report.uploaded += 1
    }

    /// After a folder moved, lists it again in the store and gives every record below it its new
    /// path and identifier, keeping each item's local state.
    private func rekeyFolder(from oldPath: String, to newPath: String, folder: Item, parent: ItemIdentifier, inode: Int64?)
        async throws(FileProviderError)
    {
        let old = try store.descendants(domainID: domainID, of: oldPath)
        var byRelative: [String: ItemRecord] = [:]
        for record in old { byRelative[String(record.path.dropFirst(oldPath.count + 1))] = record }
        var folderRecord = try store.item(domainID: domainID, path: oldPath) ?? ItemRecord(domainID: domainID, item: folder, path: newPath)
        folderRecord.update(from: folder, path: newPath)
        folderRecord.parentIdentifier = parent
        folderRecord.localInode = inode ?? folderRecord.localInode
        var upserts = [folderRecord]
        var queue: [(ItemIdentifier, String)] = [(folder.identifier, "")]
        while let (identifier, relative) = queue.popLast() {
            for var item in try await backend.enumerateAllItems(in: identifier) where Filename.isValid(item.filename) {
                item.parentIdentifier = identifier
                let childRelative = relative.isEmpty ? item.filename : relative + "/" + item.filename
                let childPath = newPath + "/" + childRelative
                var record = byRelative[childRelative] ?? ItemRecord(domainID: domainID, item: item, path: childPath)
                record.update(from: item, path: childPath)
                upserts.append(record)
                if item.kind == .folder { queue.append((item.identifier, childRelative)) }
            }
        }
        try store.deleteSubtree(domainID: domainID, path: oldPath)
        try store.apply(domainID: domainID, upserts: upserts, deletions: [])
    }

    // MARK: Deletions

    private func uploadDeletion(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        do {
            try await journalled("delete", record.identifier.rawValue, payload: ["path": record.path]) { _ in
                try await backend.deleteItem(
                    identifier: record.identifier, baseVersion: record.kind == .folder ? nil : record.version,
                    options: record.kind == .folder ? [.recursive] : [])
            }
        } catch where error.code == .noSuchItem {
            // Already gone from the store.
        } catch where error.code == .versionOutOfDate {
            // Deleted here, edited in the store: the store's version comes back as a placeholder.
            let current = try await backend.item(for: record.identifier)
            var restored = record
            restored.update(from: current, path: record.path)
            restored.state = .placeholder
            restored.localContentVersion = nil
            restored.localSize = nil
            restored.localModificationNanos = nil
            restored.localInode = nil
            let metadata = PlaceholderMetadata(domain: domain.name, record: restored)
            try await executor.run { [replica] in try replica.writePlaceholder(record.path, metadata) }
            try store.save(restored)
            try store.recordConflict(
                ConflictRecord(domainID: domainID, path: record.path, keptPath: nil, kind: "deletedAndEdited",
                               details: "deleted here and edited in the store; the store's version came back"))
            report.conflicts += 1
            return
        }
        try store.deleteSubtree(domainID: domainID, path: record.path)
        report.uploaded += 1
    }
}
