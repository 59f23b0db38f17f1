import Foundation
import ProviderCore
import ProviderStore

/// Resolves sync up's conflicts by keeping both versions: nothing is lost. The local item is
/// renamed (`name 2.ext` for a name the store already has, `name (conflicted copy <date>
/// <host>).ext` for an edit on both sides), the store's version keeps the name, and the
/// conflict is recorded (`fileproviderctl conflicts`), counted in the report and, where the
/// user has something to look at, noted.
///
/// It changes the replica and the database only; what a resolution leaves for the store (a
/// local copy to upload as a new item) it returns to the ``Uploader``, which sends it.
/// Blocking file work runs on the context's executor, as everywhere in sync up.
struct ConflictResolver: Sendable {
    let context: DomainContext
    /// Brings back the store's version of an item that was edited on both sides.
    let downloader: Downloader

    /// A local file a resolution leaves to upload as a new item.
    struct NewItem: Sendable {
        let path: String
        let fingerprint: FileFingerprint
    }

    /// Both sides edited a file: the store's version now takes the name (as a placeholder, in
    /// the database too) and the local one is a conflicted copy.
    struct BothKept: Sendable {
        /// The item as the store has it now, recorded as a placeholder at its path.
        let original: ItemRecord
        /// The conflicted copy, to upload as a new item (`nil` when it is gone already).
        let copy: NewItem?
    }

    // MARK: Names taken in the store

    /// A new local item (or one moved, with `moved`) took a name the store already has
    /// (`filenameCollision`): the local item is renamed `name 2.ext` (the first free number)
    /// and the collision recorded. Returns the new path, which the caller sends instead.
    /// - Throws: `filenameCollision` when no name is free; `localIOFailure` when the replica or
    ///   the database cannot be written.
    func renameAfterNameCollision(_ path: String, kind: ItemKind, moved: Bool, report: inout SyncReport)
        async throws(FileProviderError) -> String
    {
        let (_, name) = RelativePath(path).split
        let renamed = try await renameLocally(path, kind: kind) { ConflictName.numbered(name, $0) }
        try await record(
            "nameCollision", at: path, keptPath: renamed,
            details: moved
                ? "a local item was moved to a name the store already had; it was renamed"
                : "a new local item took a name the store already had; it was renamed")
        report.conflicts += 1
        report.notices.append(
            moved
                ? "\(context.display(path)): the name was taken in the store; moved to \(context.display(renamed)) instead"
                : "\(context.display(path)): the name was taken in the store; uploaded as \(context.display(renamed))")
        return renamed
    }

    // MARK: Edits

    /// Both sides edited a file (`versionOutOfDate` on an edit): the store's version takes the
    /// name, the local one becomes a conflicted copy. The caller uploads the copy, then brings
    /// the original back with ``bringBack(_:report:)``.
    /// - Throws: `filenameCollision` when no name is free for the copy; what the backend's
    ///   `item(for:)` throws (`noSuchItem` when the store deleted the item meanwhile);
    ///   `localIOFailure` when the replica or the database cannot be written.
    func keepBoth(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) -> BothKept {
        let (_, name) = RelativePath(record.path).split
        let copyName = ConflictName.conflictedCopy(of: name)
        let copyPath = try await renameLocally(record.path, kind: .file) { attempt in
            attempt == 2 ? copyName : ConflictName.numbered(copyName, attempt - 1)
        }
        try await self.record(
            "bothEdited", at: record.path, keptPath: copyPath,
            details: "edited here and in the store; the local version was kept as a conflicted copy")
        report.conflicts += 1
        report.notices.append("\(context.display(record.path)): edited on both sides; your version is \(context.display(copyPath))")
        // The original name now holds the store's version.
        let current = try await context.backend.item(for: record.identifier)
        var original = record
        original.update(from: current, path: record.path)
        original.markPlaceholder()
        let metadata = PlaceholderMetadata(domain: context.domain.name, record: original)
        try await context.executor.run { [replica = context.replica, original] in try replica.writePlaceholder(original.path, metadata) }
        try await save(original)
        let (replica, domain) = (context.replica, context.domain.name)
        let print = try await context.executor.run {
            ReplicaStatus.conflict.writeIfFile(atPath: replica.path(copyPath), domain: domain)
            return replica.fingerprint(atPath: replica.path(copyPath))
        }
        return BothKept(original: original, copy: print.map { NewItem(path: copyPath, fingerprint: $0) })
    }

    /// Downloads the store's version of a file that was edited on both sides (``keepBoth(_:report:)``);
    /// a failure is noted in the report, and the next sync tries again.
    func bringBack(_ original: ItemRecord, report: inout SyncReport) async {
        for outcome in await downloader.download([original], events: nil) {
            if let notice = outcome.notDownloadedNotice {
                report.skip(
                    context.relativePath(of: outcome.path), "not downloaded: \(outcome.error?.message ?? "")", notice: notice)
            }
        }
    }

    /// A real file written at the real name of an item that is not downloaded: its writer never
    /// saw the item's contents, so it is not an edit of them. The store's item keeps the name
    /// (its placeholder stays, or is written again) and the file becomes a conflicted copy.
    /// Nothing is sent to the store's item. When the store no longer has the item, there is
    /// nothing to keep beside the file: its placeholder and record go and the file itself is
    /// returned, to go up under its name.
    ///
    /// Returns the file to upload as a new item, or `nil` when the copy is gone already.
    /// - Throws: what the backend's `item(for:)` throws, except `noSuchItem`; `filenameCollision`
    ///   when no name is free for the copy; `localIOFailure` when the replica or the database
    ///   cannot be written.
    func keepWrittenOverPlaceholder(_ record: ItemRecord, fingerprint: FileFingerprint, report: inout SyncReport)
        async throws(FileProviderError) -> NewItem?
    {
        let replica = context.replica
        if try await !context.storeStillHas(record.identifier) {
            try await context.executor.run { try replica.removePlaceholder(record.path) }
            try await forget(record)
            return NewItem(path: record.path, fingerprint: fingerprint)
        }
        let (_, name) = RelativePath(record.path).split
        let copyName = ConflictName.conflictedCopy(of: name)
        let metadata = PlaceholderMetadata(domain: context.domain.name, record: record)
        let copyPath = try await renameLocally(record.path, kind: .file, movingPlaceholder: false) { attempt in
            attempt == 2 ? copyName : ConflictName.numbered(copyName, attempt - 1)
        }
        try await context.executor.run {
            if !replica.placeholderExists(record.path) {
                try replica.writePlaceholder(record.path, metadata)
            }
        }
        try await self.record(
            "overwrotePlaceholder", at: record.path, keptPath: copyPath,
            details: "a file was written at the name of an item that was not downloaded; the store's item kept the name")
        report.conflicts += 1
        report.notices.append(
            "\(context.display(record.path)): a file was written there without the item's contents; the store's version keeps the name, yours is \(context.display(copyPath))"
        )
        let domain = context.domain.name
        let print = try await context.executor.run {
            ReplicaStatus.conflict.writeIfFile(atPath: replica.path(copyPath), domain: domain)
            return replica.fingerprint(atPath: replica.path(copyPath))
        }
        return print.map { NewItem(path: copyPath, fingerprint: $0) }
    }

    /// Edited here, deleted in the store (`noSuchItem` on an edit): the edit wins. The item's
    /// record goes (and the placeholder a real file replaced: a crash before the record is
    /// deleted finds the same edit again), and the caller uploads the file as a new item.
    /// - Throws: `localIOFailure` when the replica or the database cannot be written.
    func editedAndDeleted(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        if record.state == .placeholder {
            try await context.executor.run { [replica = context.replica] in try replica.removePlaceholder(record.path) }
        }
        try await forget(record)
        try await self.record(
            "editedAndDeleted", at: record.path, keptPath: nil, details: "edited here and deleted in the store; uploaded again")
        report.conflicts += 1
    }

    // MARK: Moves and deletions

    /// Moved here to `path`, changed in the store (`versionOutOfDate` on a move): keep both. The
    /// store's version stays where it is and comes back with this sync's listing (the record is
    /// forgotten and the next sync down lists everything). Returns whether the local item at
    /// `path` is to be uploaded as a new item: a moved placeholder (no contents of its own) is
    /// removed instead.
    /// - Throws: `localIOFailure` when the replica or the database cannot be written.
    func movedAndEdited(_ record: ItemRecord, to path: String, report: inout SyncReport) async throws(FileProviderError) -> Bool {
        let (store, domainID) = (context.store, context.domainID)
        try await context.executor.runToCompletion { try store.deleteSubtree(domainID: domainID, path: record.path) }
        try await context.executor.runToCompletion { [context] in try context.relistNextSync() }
        try await self.record(
            "movedAndEdited", at: record.path, keptPath: path,
            details: "moved here and changed in the store; the store's version stayed at the old place")
        report.conflicts += 1
        if record.state == .placeholder || record.state == .symlink {
            try await context.executor.run { [replica = context.replica] in try replica.removePlaceholder(path) }
            return false
        }
        return true
    }

    /// Deleted here, edited in the store (`versionOutOfDate` on a file's deletion): the store's
    /// version comes back as a placeholder.
    /// - Throws: what the backend's `item(for:)` throws; `localIOFailure` when the replica or
    ///   the database cannot be written.
    func deletedAndEdited(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        let current = try await context.backend.item(for: record.identifier)
        var restored = record
        restored.update(from: current, path: record.path)
        restored.markPlaceholder()
        let metadata = PlaceholderMetadata(domain: context.domain.name, record: restored)
        try await context.executor.run { [replica = context.replica] in try replica.writePlaceholder(record.path, metadata) }
        try await save(restored)
        try await self.record(
            "deletedAndEdited", at: record.path, keptPath: nil,
            details: "deleted here and edited in the store; the store's version came back")
        report.conflicts += 1
    }

    /// A folder deleted here whose deletion the store refused in part (files it changed, items
    /// this replica never saw): what it kept comes back with the next listing.
    /// - Throws: `localIOFailure` when the database cannot be written.
    func folderDeletionKeptItems(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        try await context.executor.runToCompletion { [context] in try context.relistNextSync() }
        try await self.record(
            "deletedAndEdited", at: record.path, keptPath: nil,
            details: "deleted here while the store had changes or new items in it; those came back")
        report.conflicts += 1
        report.notices.append("\(context.display(record.path)): deleted here, but the store had changes in it; they came back")
    }

    // MARK: Helpers

    /// Saves a record on the executor. - Throws: `localIOFailure` when the database fails.
    private func save(_ record: ItemRecord) async throws(FileProviderError) {
        let store = context.store
        try await context.executor.runToCompletion { try store.save(record) }
    }

    /// Deletes an item's record on the executor. - Throws: `localIOFailure` when the database fails.
    private func forget(_ record: ItemRecord) async throws(FileProviderError) {
        let (store, domainID, identifier) = (context.store, context.domainID, record.identifier)
        try await context.executor.runToCompletion { try store.apply(domainID: domainID, upserts: [], deletions: [identifier]) }
    }

    /// Records a conflict (`fileproviderctl conflicts`).
    /// - Throws: `localIOFailure` when the database cannot be written.
    private func record(_ kind: String, at path: String, keptPath: String?, details: String) async throws(FileProviderError) {
        let (store, conflict) = (
            context.store, ConflictRecord(domainID: context.domainID, path: path, keptPath: keptPath, kind: kind, details: details)
        )
        try await context.executor.runToCompletion { try store.recordConflict(conflict) }
    }

    /// Renames a local item to the first free name `makeName(2)`, `makeName(3)`, …; returns the
    /// new path. With `movingPlaceholder`, a placeholder that stands at `path` without a file
    /// (a moved placeholder) is what moves; without it, only the file does.
    /// - Throws: `localIOFailure` when there is nothing to move; `filenameCollision` when no name is free.
    private func renameLocally(
        _ path: String, kind: ItemKind, movingPlaceholder: Bool = true, makeName: @escaping @Sendable (Int) -> String
    ) async throws(FileProviderError) -> String {
        let (parentPath, _) = RelativePath(path).split
        let replica = context.replica
        let domainID = context.domainID
        let store = context.store
        return try await context.executor.run {
            for attempt in 2..<1000 {
                let candidate = parentPath.isEmpty ? makeName(attempt) : parentPath + "/" + makeName(attempt)
                if replica.fingerprint(atPath: replica.path(candidate)) != nil { continue }
                if replica.placeholderExists(candidate) { continue }
                if try store.item(domainID: domainID, path: candidate) != nil { continue }
                if movingPlaceholder, replica.placeholderExists(path),
                    replica.placeholderUnderItsName(path) != nil || replica.fingerprint(atPath: replica.path(path)) == nil
                {
                    // A moved placeholder: its file carries the name.
                    try replica.movePlaceholder(from: path, to: candidate)
                } else {
                    try replica.move(fromPath: replica.path(path), toPath: replica.path(candidate))
                }
                return candidate
            }
            throw FileProviderError(.filenameCollision, "no free name for \(path)")
        }
    }
}
