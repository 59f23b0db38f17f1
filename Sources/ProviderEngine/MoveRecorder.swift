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

    /// Adds the identifiers a folder move gave the items below it (matched by path) to `renamed`:
    /// the old identifiers of the records in `old` (the folder and what was below it at
    /// `oldPath`), to their new ones at `newPath`. Chains of moves within one push resolve to the
    /// newest identifier.
    /// - Throws: `localIOFailure` when the database fails; `cancelled` when the task was
    ///   cancelled before the database was read (on the executor).
    func noteRenamedIdentifiers(from old: [ItemRecord], oldPath: String, newPath: String, into renamed: inout [String: String])
        async throws(FileProviderError)
    {
        let (store, domainID) = (context.store, context.domainID)
        let now = try await context.executor.run {
            var now: [String: String] = [:]
            if let folder = try store.item(domainID: domainID, path: newPath) { now[""] = folder.identifier.rawValue }
            for record in try store.descendants(domainID: domainID, of: newPath) {
                now[String(record.path.dropFirst(newPath.count))] = record.identifier.rawValue
            }
            return now
        }
        var added: [String: String] = [:]
        for record in old {
            guard let new = now[String(record.path.dropFirst(oldPath.count))], new != record.identifier.rawValue else { continue }
            added[record.identifier.rawValue] = new
        }
        // Chains of moves within one push: an older alias points at the newest identifier.
        for (key, value) in renamed { renamed[key] = added[value] ?? value }
        renamed.merge(added) { _, new in new }
    }

    /// After a folder moved, lists it again in the store and gives every record below it its new
    /// path and identifier, keeping each item's local state.
    /// - Throws: what the backend throws while listing; `localIOFailure` when the replica or
    ///   the database cannot be written.
    private func rekeyFolder(from oldPath: String, to newPath: String, folder: Item, parent: ItemIdentifier, inode: Int64?)
        async throws(FileProviderError)
    {
        let (store, domainID) = (context.store, context.domainID)
        let (old, stored) = try await context.executor.run {
            (try store.descendants(domainID: domainID, of: oldPath), try store.item(domainID: domainID, path: oldPath))
        }
        var byRelative: [String: ItemRecord] = [:]
        for record in old { byRelative[String(record.path.dropFirst(oldPath.count + 1))] = record }
        var folderRecord = stored ?? ItemRecord(domainID: domainID, item: folder, path: newPath)
        folderRecord.update(from: folder, path: newPath)
        folderRecord.parentIdentifier = parent
        folderRecord.localInode = inode ?? folderRecord.localInode
        var upserts = [folderRecord]
        var queue: [(ItemIdentifier, String)] = [(folder.identifier, "")]
        while let (identifier, relative) = queue.popLast() {
            for var item in try await context.backend.enumerateAllItems(in: identifier) where Filename.isValid(item.filename) {
                item.parentIdentifier = identifier
                let childRelative = relative.isEmpty ? item.filename : relative + "/" + item.filename
                let childPath = newPath + "/" + childRelative
                // Only items this replica knew are re-keyed. Items someone else added to the
                // folder are not recorded here: they have no placeholder yet, so the next scan
                // would take them for local deletions. Sync down adds them as new items.
                guard var record = byRelative[childRelative], record.kind == item.kind else { continue }
                byRelative[childRelative] = nil
                // The known version stays, so sync down still sees a change made in the store
                // meanwhile (and downloads it again or rewrites the placeholder).
                let (contentVersion, metadataVersion) = (record.contentVersion, record.metadataVersion)
                record.update(from: item, path: childPath)
                record.contentVersion = contentVersion
                record.metadataVersion = metadataVersion
                upserts.append(record)
                if item.kind == .folder { queue.append((item.identifier, childRelative)) }
            }
        }
        // Known items the store no longer has below the folder (deleted or replaced meanwhile)
        // move along under an identifier no store uses, so sync down sees them gone and
        // removes their local copies as for any deletion in the store (keeping local edits).
        if !byRelative.isEmpty { try await context.executor.runToCompletion { [context] in try context.relistNextSync() } }
        for (relative, record) in byRelative {
            var gone = record
            gone.path = newPath + "/" + relative
            gone.identifier = ItemIdentifier("fileprovider-gone:" + UUID().uuidString)
            upserts.append(gone)
        }
        let replica = context.replica
        // Placeholders below carry their item's identifier: rewrite them, or a placeholder moved
        // later would not be recognised as its item (and the item would look deleted here).
        let rewritten = upserts.filter { $0.state == .placeholder || $0.state == .symlink }
            .map { ($0.path, PlaceholderMetadata(domain: context.domain.name, record: $0)) }
        if !rewritten.isEmpty {
            try await context.executor.run {
                for (path, metadata) in rewritten where replica.placeholderExists(path) {
                    try replica.writePlaceholder(path, metadata)
                }
            }
        }
        let replaced = upserts
        try await context.executor.runToCompletion { try store.replaceSubtree(domainID: domainID, path: oldPath, with: replaced) }
        // Placeholders below the folder carry the old identifiers: the scan knows a moved
        // placeholder by its identifier, so each is rewritten (where it still is). A crash
        // before this leaves old identifiers, as before the move was recorded.
        let placeholders = upserts.filter { $0.state == .placeholder || $0.state == .symlink }
        if placeholders.isEmpty { return }
        let name = context.domain.name
        try await context.executor.run {
            for record in placeholders where replica.placeholderExists(record.path) {
                try? replica.writePlaceholder(record.path, PlaceholderMetadata(domain: name, record: record))
            }
        }
    }
}
