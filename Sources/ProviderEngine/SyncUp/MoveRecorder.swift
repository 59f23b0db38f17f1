import Foundation
import ProviderCore
import ProviderStore

/// Records in the database and the replica the moves the store made for sync up: a file's
/// record takes its new place, a folder's records (it and everything below it) are re-keyed to
/// the paths and identifiers the store gives them now (path-addressed stores derive
/// identifiers from paths), and the placeholders below carry the new identifiers.
///
/// Also recognises a replayed move whose first attempt reached the store before the process
/// died, so that it is recorded, not uploaded again as a duplicate.
struct MoveRecorder: Sendable {
    let context: DomainContext

    /// Finishes a replayed move whose first attempt reached the store before the process died:
    /// the item is gone from its old place and at its new one (a folder by kind, a file with
    /// the same content version), so it is recorded there. Returns false when the store does not
    /// look like that.
    /// - Throws: what the backend throws while asking for the item or listing its new folder;
    ///   `localIOFailure` when the replica or the database cannot be written.
    func adoptReplayedMove(
        _ record: ItemRecord, to path: String, name: String, parent: ItemIdentifier, fingerprint: FileFingerprint?
    )
        async throws(FileProviderError) -> Bool
    {
        guard try await !context.storeStillHas(record.identifier),
            let moved = try await context.backend.enumerateAllItems(in: parent).first(where: {
                $0.filename == name && $0.kind == record.kind
            }),
            record.kind == .folder || moved.version.content == record.contentVersion
        else { return false }
        try await recordMove(record, to: path, now: moved, parent: parent, fingerprint: fingerprint)
        return true
    }

    /// Records a move the store made: a folder's records are re-keyed, a file's record takes
    /// its new place (and its placeholder the new identifier).
    /// - Throws: what the backend throws while listing a moved folder; `localIOFailure` when
    ///   the replica or the database cannot be written.
    func recordMove(_ record: ItemRecord, to path: String, now item: Item, parent: ItemIdentifier, fingerprint: FileFingerprint?)
        async throws(FileProviderError)
    {
        if record.kind == .folder {
            try await rekeyFolder(from: record.path, to: path, folder: item, parent: parent, inode: fingerprint?.inode)
            return
        }
        var moved = record
        moved.update(from: item, path: path)
        moved.parentIdentifier = parent
        if let fingerprint, moved.state == .materialized { moved.localInode = fingerprint.inode }
        let metadata =
            moved.state == .placeholder || moved.state == .symlink ? PlaceholderMetadata(domain: context.domain.name, record: moved) : nil
        let (store, domainID, replica) = (context.store, context.domainID, context.replica)
        let deletions = record.identifier == moved.identifier ? [] : [record.identifier]
        // The placeholder and the record in one job on the executor.
        try await context.executor.runToCompletion { [moved] in
            if let metadata { try replica.writePlaceholder(path, metadata) }
            try store.apply(domainID: domainID, upserts: [moved], deletions: deletions)
        }
    }

    /// Old identifiers of placeholders a folder move re-keyed that were not where their items
    /// are now (the user moved them elsewhere before the move was sent), to their new ones:
    /// taken by ``noteRenamedIdentifiers(into:)``. Copies of the recorder share it.
    let movedAwayPlaceholders = Mutex<[String: String]>([:])

    /// Adds the identifiers folder moves gave placeholders that are away from their items
    /// (``movedAwayPlaceholders``) to `renamed`, for the next scan to recognise them: a
    /// placeholder where its item is was rewritten with the new identifier, and a downloaded
    /// file is known by its inode, so only those are needed (what the user moved meanwhile,
    /// not the whole subtree). Chains of moves within one push resolve to the newest identifier.
    func noteRenamedIdentifiers(into renamed: inout [String: String]) {
        let added = movedAwayPlaceholders.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
        if added.isEmpty { return }
        // Chains of moves within one push: an older alias points at the newest identifier.
        for (key, value) in renamed { renamed[key] = added[value] ?? value }
        renamed.merge(added) { _, new in new }
    }

    /// After a folder moved, lists it again in the store, a folder at a time, and gives every
    /// record below it its new path and identifier, keeping each item's local state. Memory is
    /// bounded by a folder's listing and a page of records (``DomainContext/subtreePage``): the
    /// new records are staged in the database folder by folder and replace the old subtree in
    /// one transaction at the end (``MetadataStore/finishRekey(domainID:path:)``).
    /// - Throws: what the backend throws while listing; `localIOFailure` when the replica or
    ///   the database cannot be written.
    private func rekeyFolder(from oldPath: String, to newPath: String, folder: Item, parent: ItemIdentifier, inode: Int64?)
        async throws(FileProviderError)
    {
        let (store, domainID, executor) = (context.store, context.domainID, context.executor)
        let stored = try await executor.run {
            try store.beginRekey(domainID: domainID)
            return try store.item(domainID: domainID, path: oldPath)
        }
        var folderRecord = stored ?? ItemRecord(domainID: domainID, item: folder, path: newPath)
        folderRecord.update(from: folder, path: newPath)
        folderRecord.parentIdentifier = parent
        folderRecord.localInode = inode ?? folderRecord.localInode
        // Staged a page at a time (several small folders' records in one transaction).
        let pageSize = max(1, context.subtreePage.withLock { $0 })
        var pending: [(record: ItemRecord, old: ItemIdentifier?)] = [(folderRecord, stored?.identifier)]
        func flush(atLeast count: Int) async throws(FileProviderError) {
            guard !pending.isEmpty, pending.count >= count else { return }
            try await stage(pending)
            pending.removeAll()
        }
        var anyGone = false
        // Folders still to list: the store's identifier, the path the records had before.
        var queue: [(ItemIdentifier, String)] = [(folder.identifier, oldPath)]
        while let (identifier, oldFolder) = queue.popLast() {
            let known = try await executor.run { try store.children(domainID: domainID, inFolderAt: oldFolder) }
            var byName: [String: ItemRecord] = [:]
            for record in known { byName[String(record.path.dropFirst(oldFolder.count + 1))] = record }
            for var item in try await context.backend.enumerateAllItems(in: identifier) where Filename.isValid(item.filename) {
                item.parentIdentifier = identifier
                // Only items this replica knew are re-keyed. Items someone else added to the
                // folder are not recorded here: they have no placeholder yet, so the next scan
                // would take them for local deletions. Sync down adds them as new items.
                guard var record = byName[item.filename], record.kind == item.kind else { continue }
                byName[item.filename] = nil
                let old = record
                // The known version stays, so sync down still sees a change made in the store
                // meanwhile (and downloads it again or rewrites the placeholder).
                let (contentVersion, metadataVersion) = (record.contentVersion, record.metadataVersion)
                record.update(from: item, path: newPath + old.path.dropFirst(oldPath.count))
                record.contentVersion = contentVersion
                record.metadataVersion = metadataVersion
                pending.append((record, old.identifier))
                if item.kind == .folder { queue.append((item.identifier, old.path)) }
            }
            try await flush(atLeast: pageSize)
            // Known items the store no longer has in the folder (deleted or replaced meanwhile),
            // and what was below them, move along under an identifier no store uses, so sync
            // down sees them gone and removes their local copies as for any deletion in the
            // store (keeping local edits).
            for record in byName.values.sorted(by: { $0.path < $1.path }) {
                anyGone = true
                pending.append((Self.gone(record, from: oldPath, to: newPath), record.identifier))
                if record.kind == .folder {
                    try await RecordReader(context: context).forEachSubtreePage(below: record.path) { page throws(FileProviderError) in
                        pending += page.map { (Self.gone($0, from: oldPath, to: newPath), $0.identifier) }
                        try await flush(atLeast: pageSize)
                        return true
                    }
                }
                try await flush(atLeast: pageSize)
            }
        }
        try await flush(atLeast: 1)
        if anyGone { try await executor.runToCompletion { [context] in try context.relistNextSync() } }
        try await executor.runToCompletion { try store.finishRekey(domainID: domainID, path: oldPath) }
        // Placeholders below the folder carry the old identifiers: the scan knows a moved
        // placeholder by its identifier, so each is rewritten (where it still is), a page at a
        // time. A crash before this leaves old identifiers, as before the move was recorded.
        let (replica, name) = (context.replica, context.domain.name)
        try await RecordReader(context: context).forEachSubtreePage(below: newPath) { page throws(FileProviderError) in
            let placeholders = page.filter { $0.state == .placeholder || $0.state == .symlink }
            if placeholders.isEmpty { return true }
            try await executor.run {
                for record in placeholders where replica.placeholderExists(record.path) {
                    try? replica.writePlaceholder(record.path, PlaceholderMetadata(domain: name, record: record))
                }
            }
            return true
        }
    }

    /// A known item the store no longer has below a moved folder: at its new path, under an
    /// identifier no store uses.
    private static func gone(_ record: ItemRecord, from oldPath: String, to newPath: String) -> ItemRecord {
        var gone = record
        gone.path = newPath + record.path.dropFirst(oldPath.count)
        gone.identifier = ItemIdentifier("fileprovider-gone:" + UUID().uuidString)
        return gone
    }

    /// Stages re-keyed records (each with its old identifier) in the database and rewrites the
    /// placeholders among them: or a placeholder moved later would not be recognised as its
    /// item (and the item would look deleted here). A placeholder not where its item now is
    /// (moved by the user) keeps its old identifier, noted in ``movedAwayPlaceholders``.
    /// - Throws: `localIOFailure` when the replica or the database cannot be written.
    private func stage(_ batch: [(record: ItemRecord, old: ItemIdentifier?)]) async throws(FileProviderError) {
        if batch.isEmpty { return }
        let (store, domainID, replica, name) = (context.store, context.domainID, context.replica, context.domain.name)
        let records = batch.map(\.record)
        let placeholders = batch.filter { $0.record.state == .placeholder || $0.record.state == .symlink }
        let away = try await context.executor.run { () throws(FileProviderError) -> [String: String] in
            try store.stageRekeyed(domainID: domainID, records)
            var away: [String: String] = [:]
            for (record, old) in placeholders {
                if replica.placeholderExists(record.path) {
                    try replica.writePlaceholder(record.path, PlaceholderMetadata(domain: name, record: record))
                } else if let old, old != record.identifier {
                    away[old.rawValue] = record.identifier.rawValue
                }
            }
            return away
        }
        if !away.isEmpty { movedAwayPlaceholders.withLock { $0.merge(away) { _, new in new } } }
    }
}
