import Foundation
import ProviderCore
import ProviderStore

/// Sends one local change of a domain's replica to its store: a creation (`createItem`), an
/// edit or a move (`modifyItem` with the base version) or a deletion (`deleteItem`), each as a
/// journalled operation (``OperationJournal``) that records its result in the database before
/// its entry is closed. A conflict keeps both versions (``ConflictResolver``); a move the store
/// made is recorded by the ``MoveRecorder``.
///
/// ``SyncUp`` finds the changes and decides what goes at once; the uploader is the only part of
/// sync up that writes to the store.
struct Uploader: Sendable {
    let context: DomainContext
    let journal: OperationJournal
    let conflicts: ConflictResolver
    let moves: MoveRecorder

    /// Fields of a file's contents: when the store reports one still pending, the contents go
    /// again with a later sync.
    static let contentFields: ItemFields = [.contents, .contentModificationDate]

    /// Sends one change and records its result; conflicts are resolved by keeping both
    /// versions and counted in `report`, and what was sent is counted in `report.uploaded`.
    /// - Throws: what the backend throws that no resolution handles (`serverUnreachable`,
    ///   `notAuthenticated`, … ; `noSuchItem` when the item's folder is not in the store yet);
    ///   `filenameCollision` when no free name is left for a renamed item; `localIOFailure` when
    ///   the replica, the database or the journal cannot be written; `cancelled` when the task
    ///   was cancelled before a blocking step.
    func upload(_ change: LocalChange, report: inout SyncReport) async throws(FileProviderError) {
        switch change {
        case .created(let path, let kind, let fingerprint):
            try await uploadCreation(path: path, kind: kind, fingerprint: fingerprint, report: &report)
        case .modified(let record, let fingerprint):
            try await uploadEdit(record, fingerprint: fingerprint, report: &report)
        case .flagsChanged(let record, let fingerprint):
            try await uploadFlags(record, fingerprint: fingerprint, report: &report)
        case .writtenOverPlaceholder(let record, let fingerprint):
            // A program saw a dataless file under its real name, with its size, and replaced
            // it (emptied it while opening it, or renamed a new file over it): an edit of the
            // item, based on the version the file stood for. A `.placeholder` file's name was
            // never the item's: what is written there is kept beside it.
            if context.replica.writesAtAnItemsNameEditIt {
                try await uploadEdit(record, fingerprint: fingerprint, report: &report)
            } else if let copy = try await conflicts.keepWrittenOverPlaceholder(record, fingerprint: fingerprint, report: &report) {
                try await uploadCreation(path: copy.path, kind: .file, fingerprint: copy.fingerprint, report: &report)
            }
        case .moved(let record, let to, let fingerprint):
            try await uploadMove(record, to: to, fingerprint: fingerprint, report: &report)
        case .deleted(let record):
            try await uploadDeletion(record, report: &report)
        }
    }

    // MARK: Creations

    /// Creates a local file or folder in the store (`createItem` under its folder's item).
    /// - Parameter adopting: the item may already be in the store as our own (a folder merges
    ///   with a folder of the same name; a replayed move finds its file already there), so the
    ///   create runs with `mayAlreadyExist`.
    /// - Throws: `noSuchItem` when its folder is not in the store yet (retried by a later
    ///   sync); what ``upload(_:report:)`` throws.
    private func uploadCreation(
        path: String, kind: ItemKind, fingerprint: FileFingerprint, adopting: Bool = false, report: inout SyncReport
    )
        async throws(FileProviderError)
    {
        let (parentPath, name) = RelativePath(path).split
        let (domainID, replica, backend) = (context.domainID, context.replica, context.backend)
        guard let parent = try await folder(at: parentPath), parent.kind == .folder else {
            throw FileProviderError(.noSuchItem, "its folder \(context.display(parentPath)) is not in the store yet; it will be retried")
        }
        var template = Item.template(
            identifier: ItemIdentifier("local:\(path)"), parent: parent.identifier, filename: name, kind: kind,
            size: kind == .file ? fingerprint.size : 0,
            contentModificationDate: Date(timeIntervalSince1970: Double(fingerprint.modificationNanos) / 1e9))
        var fields: ItemFields = [.contents, .filename, .parentItemIdentifier, .contentModificationDate]
        // A new executable file goes up executable where the store keeps the bit.
        if kind == .file && fingerprint.isExecutable && backend.capabilities.supportsFileSystemFlags {
            template.fileSystemFlags.insert(.userExecutable)
            fields.insert(.fileSystemFlags)
        }
        let contents = kind == .file ? replica.fileURL(path) : nil
        do {
            // The record is saved inside the journalled step: the entry is marked done only once
            // the database knows the item, so a crash in between replays with mayAlreadyExist
            // instead of meeting its own upload as a name collision.
            try await journal.run(.create(path: path, kind: kind), handled: [.filenameCollision]) { step in
                // The file hashed as the backend reads it (``ContentSink``).
                let sink = FastSHA256.sink()
                let result = try await step.send {
                    try await ContentSink.feeding(contents.map { [$0: sink] } ?? [:]) { () async throws(FileProviderError) -> ItemResult in
                        try await backend.createItem(
                            basedOn: template, fields: fields, contents: contents,
                            options: step.replay || adopting ? [.mayAlreadyExist] : [])
                    }
                }
                // In a batch, checked in the write that records it (one read fewer per file).
                if !step.isBatched { try await checkNew(result.item.identifier, createdAt: path) }
                var record = ItemRecord(domainID: domainID, item: result.item, path: path)
                record.parentIdentifier = parent.identifier
                record.localInode = fingerprint.inode
                if kind == .file {
                    let sent = result.shouldFetchContent ? nil : result.item.version.content
                    record.markMaterialized(contentVersion: sent, fingerprint: fingerprint)
                    record.recordSHA256(await sink.finish(size: fingerprint.size), of: sent)
                    if !result.stillPendingFields.isDisjoint(with: Self.contentFields) { record.markContentsPending() }
                }
                try await step.finish(saving: record, isNew: true)
            }
        } catch  where error.code == .filenameCollision && kind == .folder && !adopting {
            // A folder of that name is in the store already (made elsewhere, or by this replica
            // before a crash): the two merge, and their items are synced one by one.
            try await uploadCreation(path: path, kind: kind, fingerprint: fingerprint, adopting: true, report: &report)
            return
        } catch  where error.code == .filenameCollision {
            // The name is taken in the store: the later item gets `name 2.ext`.
            let renamed = try await conflicts.renameAfterNameCollision(path, kind: kind, moved: false, report: &report)
            guard let print = try await context.executor.run({ replica.fingerprint(atPath: replica.path(renamed)) }) else { return }
            try await uploadCreation(path: renamed, kind: kind, fingerprint: print, report: &report)
            return
        }
        report.uploaded += 1
    }

    /// Checks that the identifier a create returned for the item at `path` is not another
    /// item's: recorded, the new file would take that item's place (and lose its own bytes at
    /// the next eviction).
    /// - Throws: `corruptData` naming both items; `localIOFailure` when the database fails.
    private func checkNew(_ identifier: ItemIdentifier, createdAt path: String) async throws(FileProviderError) {
        let (store, domainID) = (context.store, context.domainID)
        guard
            let other = try await context.blocking({ () throws(FileProviderError) in
                try store.item(domainID: domainID, identifier: identifier)
            }),
            other.path != path
        else { return }
        throw FileProviderError(.corruptData, Self.identifierTaken(path, by: other.path, context: context))
    }

    /// What a new item whose identifier the database gives another item (at `holder`) is
    /// refused with: recorded, the new file would take that item's place.
    static func identifierTaken(_ path: String, by holder: String, context: DomainContext) -> String {
        "the store answered the creation of \(context.display(path)) with the identifier of \(context.display(holder)); nothing was recorded, the local file stays as it is"
    }

    /// The record of the folder at `path`: as the task's ``JournalBatch`` read it, else read on
    /// the executor. `nil` when the database has none.
    /// - Throws: `localIOFailure` when the database fails; `cancelled` when the task was
    ///   cancelled before the read.
    private func folder(at path: String) async throws(FileProviderError) -> ItemRecord? {
        if let read = JournalBatch.current?.folder(at: path) { return read }
        let (store, domainID) = (context.store, context.domainID)
        return try await context.executor.run { try store.item(domainID: domainID, path: path) }
    }

    // MARK: Edits

    /// Sends a local file's new contents (`modifyItem` based on the version it was downloaded as).
    /// - Throws: what ``upload(_:report:)`` throws.
    private func uploadEdit(_ record: ItemRecord, fingerprint: FileFingerprint, report: inout SyncReport) async throws(FileProviderError) {
        var item = record.item
        item.size = fingerprint.size
        item.contentModificationDate = Date(timeIntervalSince1970: Double(fingerprint.modificationNanos) / 1e9)
        let contents = context.replica.fileURL(record.path)
        let backend = context.backend
        // A chmod with the edit goes along where the store keeps the bit; otherwise the store
        // keeps its own bit with the new contents.
        var fields: ItemFields = [.contents, .contentModificationDate]
        if backend.capabilities.supportsFileSystemFlags && fingerprint.isExecutable != record.isExecutable {
            if fingerprint.isExecutable {
                item.fileSystemFlags.insert(.userExecutable)
            } else {
                item.fileSystemFlags.remove(.userExecutable)
            }
            fields.insert(.fileSystemFlags)
        }
        var attempt: JournalStep?
        do {
            // The edit is recorded inside the journalled step: the entry is marked done only once
            // the database knows it, so a crash in between replays instead of meeting its own
            // upload as a conflict.
            let handled: Set<FileProviderError.Code> = [.versionOutOfDate, .noSuchItem]
            try await journal.run(.modify(record), handled: handled, resolvedOnReplay: [.versionOutOfDate]) { step in
                attempt = step
                // The edit's base is the version the file was downloaded as, not the record's
                // latest: a sync down that kept this file (download-only, or an edit made while
                // it ran) recorded the store's newer version. Sent with that one as its base,
                // the edit would silently replace the store's change: both edited, keep both.
                if record.storeChangedSinceDownload { throw FileProviderError.versionOutOfDate(record.identifier) }
                // The file hashed as the backend reads it (``ContentSink``).
                let sink = FastSHA256.sink()
                let result = try await step.send {
                    try await ContentSink.feeding([contents: sink]) { () async throws(FileProviderError) -> ItemResult in
                        try await backend.modifyItem(
                            item, baseVersion: record.version, changedFields: fields, contents: contents,
                            options: step.replay ? [.mayAlreadyExist] : [])
                    }
                }
                try await recordUploadedEdit(
                    record, now: result.item, contentVersion: result.shouldFetchContent ? nil : result.item.version.content,
                    fingerprint: fingerprint, pending: result.stillPendingFields, step: step,
                    sha256: await sink.finish(size: fingerprint.size))
            }
        } catch  where error.code == .versionOutOfDate {
            // A replay whose first attempt reached the store before the process died finds the
            // store already holding exactly these bytes: that is no conflict. Its entry stays
            // open until this is known (a process killed while comparing replays again).
            if let attempt, attempt.replay {
                if let current = try await storeHoldsSameContents(record, as: contents) {
                    try await recordUploadedEdit(
                        record, now: current, contentVersion: current.version.content, fingerprint: fingerprint, step: attempt)
                    report.uploaded += 1
                    return
                }
                try await attempt.close()
            }
            let kept = try await conflicts.keepBoth(record, report: &report)
            if let copy = kept.copy {
                try await uploadCreation(path: copy.path, kind: .file, fingerprint: copy.fingerprint, report: &report)
            }
            await conflicts.bringBack(kept.original, report: &report)
            return
        } catch  where error.code == .noSuchItem {
            // Edited here, deleted in the store: the edit wins and the item is created again.
            try await conflicts.editedAndDeleted(record, report: &report)
            try await uploadCreation(path: record.path, kind: .file, fingerprint: fingerprint, report: &report)
            return
        }
        report.uploaded += 1
    }

    /// Sends a local `chmod` of a materialized file: `modifyItem` of `.fileSystemFlags` with the
    /// file's x bit, based on the record's version. A store that changed the item meanwhile
    /// (`versionOutOfDate`) or lost it (`noSuchItem`) gets nothing: the next sync down records
    /// its state and the next scan sends the bit again if it still differs.
    /// - Throws: what ``upload(_:report:)`` throws.
    private func uploadFlags(_ record: ItemRecord, fingerprint: FileFingerprint, report: inout SyncReport)
        async throws(FileProviderError)
    {
        var item = record.item
        if fingerprint.isExecutable {
            item.fileSystemFlags.insert(.userExecutable)
        } else {
            item.fileSystemFlags.remove(.userExecutable)
        }
        let backend = context.backend
        do {
            try await journal.run(.modify(record), handled: [.versionOutOfDate, .noSuchItem]) { step in
                if record.storeChangedSinceDownload { throw FileProviderError.versionOutOfDate(record.identifier) }
                let result = try await step.send {
                    try await backend.modifyItem(
                        item, baseVersion: record.version, changedFields: [.fileSystemFlags], contents: nil,
                        options: step.replay ? [.mayAlreadyExist] : [])
                }
                var updated = record
                updated.update(from: result.item, path: record.path)
                // The contents did not change: the local file is the download of the same
                // content version (unless the store says it changed them).
                if result.item.version.content != record.contentVersion || result.shouldFetchContent {
                    updated.localContentVersion = nil
                }
                updated.lastError = nil
                try await step.finish(saving: updated)
            }
        } catch  where error.code == .versionOutOfDate || error.code == .noSuchItem {
            return
        }
        report.uploaded += 1
    }

    /// Records an edit the store now holds: the item as the store has it, the local file as
    /// uploaded; a placeholder the real file replaced is removed.
    /// - Throws: `localIOFailure` when the replica or the database cannot be written.
    private func recordUploadedEdit(
        _ record: ItemRecord, now item: Item, contentVersion: Data?, fingerprint: FileFingerprint, pending: ItemFields = [],
        step: JournalStep? = nil, sha256: String? = nil
    )
        async throws(FileProviderError)
    {
        var updated = record
        updated.update(from: item, path: record.path)
        updated.markMaterialized(contentVersion: contentVersion, fingerprint: fingerprint)
        updated.recordSHA256(sha256, of: contentVersion)
        if !pending.isDisjoint(with: Self.contentFields) { updated.markContentsPending() }
        updated.lastError = nil
        if record.state == .placeholder {
            try await context.executor.run { [replica = context.replica] in try replica.removePlaceholder(record.path) }
        }
        if let step {
            try await step.finish(saving: updated)
        } else {
            let store = context.store
            try await context.executor.runToCompletion { [updated] in try store.save(updated) }
        }
    }

    /// The store's current item when its contents are byte for byte the local file's, else `nil`.
    /// Downloads the store's version to a staging file to compare; used only for replays.
    /// - Throws: what the backend's `fetchContents` throws, except `noSuchItem`;
    ///   `localIOFailure` when the staging file cannot be made.
    private func storeHoldsSameContents(_ record: ItemRecord, as local: URL) async throws(FileProviderError) -> Item? {
        let replica = context.replica
        let staging = replica.stagingPath(named: Downloader.stagingName(for: record.identifier) + ".compare")
        let current: Item
        do {
            try await context.executor.run { try replica.prepareStagingFile(atPath: staging, truncate: true) }
            current = try await context.backend.fetchContents(
                for: record.identifier, version: nil, to: URL(fileURLWithPath: staging, isDirectory: false), offset: 0, progress: nil)
        } catch {
            // The staging file goes, on the executor.
            _ = try? await context.executor.runToCompletion { try? replica.removeFile(atPath: staging) }
            if error.code == .noSuchItem { return nil }
            throw error
        }
        let same = try await context.executor.runToCompletion { () -> Bool in
            defer { try? replica.removeFile(atPath: staging) }
            guard let a = FileManager.default.contents(atPath: staging), let b = FileManager.default.contents(atPath: local.path) else {
                return false
            }
            return a == b
        }
        return same ? current : nil
    }

    // MARK: Moves

    /// Sends a local move or rename (`modifyItem` of the name and folder, based on the
    /// record's version) and records where the store put the item.
    /// - Throws: `noSuchItem` when its new folder is not in the store yet, or the store lost
    ///   that folder (retried by a later sync); what ``upload(_:report:)`` throws.
    private func uploadMove(_ record: ItemRecord, to path: String, fingerprint: FileFingerprint?, report: inout SyncReport)
        async throws(FileProviderError)
    {
        let (parentPath, name) = RelativePath(path).split
        let (store, domainID, backend) = (context.store, context.domainID, context.backend)
        guard let parent = try await folder(at: parentPath), parent.kind == .folder else {
            throw FileProviderError(
                .noSuchItem, "its new folder \(context.display(parentPath)) is not in the store yet; it will be retried")
        }
        var item = record.item
        item.filename = name
        item.parentIdentifier = parent.identifier
        let moves = self.moves
        var attempt: JournalStep?
        do {
            // The move is recorded inside the journalled step: were the entry marked done before
            // the database knew the new place, a process killed in between would send the move
            // again, find the item gone from its old place and upload it as a duplicate. For the
            // same reason a replay's entry stays open until its adoption is decided (below).
            _ = try await journal.run(
                .move(record, to: path), handled: [.noSuchItem, .versionOutOfDate, .filenameCollision],
                resolvedOnReplay: [.noSuchItem, .filenameCollision]
            ) { step in
                attempt = step
                let result = try await step.send {
                    try await backend.modifyItem(
                        item, baseVersion: record.version, changedFields: [.filename, .parentItemIdentifier], contents: nil, options: [])
                }
                // A move the store could not make yet (`stillPendingFields`) is not recorded: the
                // next scan finds it again and sends it again.
                if result.stillPendingFields.isDisjoint(with: [.filename, .parentItemIdentifier]) {
                    try await moves.recordMove(record, to: path, now: result.item, parent: parent.identifier, fingerprint: fingerprint)
                }
                return result
            }
        } catch  where error.code == .filenameCollision {
            if let attempt, attempt.replay {
                let adopted = try await moves.adoptReplayedMove(
                    record, to: path, name: name, parent: parent.identifier, fingerprint: fingerprint)
                try await attempt.close()
                if adopted {
                    report.uploaded += 1
                    return
                }
            }
            // The new name is taken in the store: the later item gets `name 2.ext` and moves there.
            let renamed = try await conflicts.renameAfterNameCollision(
                path, kind: record.kind == .folder ? .folder : .file, moved: true, report: &report)
            try await uploadMove(record, to: renamed, fingerprint: fingerprint, report: &report)
            return
        } catch  where error.code == .versionOutOfDate {
            // Moved here, changed in the store: keep both. The store's version stays where it
            // is and comes back with this sync's listing; a moved local file is uploaded as a new
            // item at its new place, a moved placeholder (no contents of its own) is dropped.
            if try await conflicts.movedAndEdited(record, to: path, report: &report), let fingerprint {
                try await uploadCreation(
                    path: path, kind: record.kind == .folder ? .folder : .file, fingerprint: fingerprint, report: &report)
            }
            return
        } catch  where error.code == .noSuchItem {
            // The first attempt of a replayed move reached the store before the process died.
            let replayed = attempt?.replay == true
            if let attempt, replayed {
                let adopted = try await moves.adoptReplayedMove(
                    record, to: path, name: name, parent: parent.identifier, fingerprint: fingerprint)
                try await attempt.close()
                if adopted {
                    report.uploaded += 1
                    return
                }
            }
            // Either the item or its new folder is gone from the store. Only the first is
            // "moved here, deleted there"; a vanished destination is retried once sync down has
            // settled the folders (the local folder holding the item is uploaded again first).
            if try await context.storeStillHas(record.identifier) { throw error }
            // Moved here, deleted in the store.
            try await context.executor.runToCompletion { try store.deleteSubtree(domainID: domainID, path: record.path) }
            if record.state == .placeholder || record.state == .symlink {
                try await context.executor.run { [replica = context.replica] in try replica.removePlaceholder(path) }
                return
            }
            if let fingerprint {
                // A replayed move whose first attempt reached the store finds the item already at
                // its new place: created with mayAlreadyExist, it is adopted, not duplicated.
                try await uploadCreation(
                    path: path, kind: record.kind == .folder ? .folder : .file, fingerprint: fingerprint, adopting: replayed,
                    report: &report)
            }
            return
        }
        report.uploaded += 1
    }

    // MARK: Deletions

    /// Sends a local deletion (`deleteItem` based on the version the file was downloaded as);
    /// a folder's deletion goes item by item (``uploadFolderDeletion(_:report:)``).
    /// - Throws: what ``upload(_:report:)`` throws.
    private func uploadDeletion(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        // The scan saw it gone, but another process may have been replacing it meanwhile (a
        // download renamed into place while its placeholder went, an eviction): a listing taken
        // in the middle sees neither. Only what is still gone now is deleted in the store.
        let replica = context.replica
        if try await context.executor.run({ Self.isInReplica(record, replica) }) { return }
        if record.kind == .folder {
            try await uploadFolderDeletion(record, report: &report)
            return
        }
        let backend = context.backend
        do {
            try await journal.run(.delete(record), handled: [.noSuchItem, .versionOutOfDate]) { step in
                // Based on the version the file was downloaded as (see `uploadEdit`): a newer one
                // that sync down recorded but did not download is a change its user never saw.
                if record.storeChangedSinceDownload { throw FileProviderError.versionOutOfDate(record.identifier) }
                try await step.send {
                    try await backend.deleteItem(identifier: record.identifier, baseVersion: record.version, options: [])
                }
            }
        } catch  where error.code == .noSuchItem {
            // Already gone from the store.
        } catch  where error.code == .versionOutOfDate {
            // Deleted here, edited in the store: the store's version comes back as a placeholder.
            try await conflicts.deletedAndEdited(record, report: &report)
            return
        }
        let (store, domainID) = (context.store, context.domainID)
        try await context.executor.runToCompletion { try store.deleteSubtree(domainID: domainID, path: record.path) }
        report.uploaded += 1
    }

    /// Whether the replica holds the item at its path: a folder, a file, or the item's own
    /// placeholder. Blocking.
    private static func isInReplica(_ record: ItemRecord, _ replica: Replica) -> Bool {
        guard let print = replica.fingerprint(atPath: replica.path(record.path)) else {
            guard record.kind != .folder, replica.isPlaceholder(of: record.identifier, at: record.path) else {
                return false
            }
            return true
        }
        return record.kind == .folder ? print.isDirectory : print.isRegularFile
    }

    /// A folder deleted here: what this replica knew below it is deleted bottom-up, each file
    /// with its base version, then each folder without `recursive`. A file edited in the store
    /// (`versionOutOfDate`) and a folder that still holds items this replica never saw
    /// (`directoryNotEmpty`) stay in the store and come back with the next listing: deleting a
    /// folder never deletes what its user did not see.
    /// - Throws: what ``upload(_:report:)`` throws.
    private func uploadFolderDeletion(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        let (store, domainID, backend) = (context.store, context.domainID, context.backend)
        var kept = false
        func delete(_ item: ItemRecord) async throws(FileProviderError) {
            do {
                try await journal.run(.delete(item), handled: [.noSuchItem, .versionOutOfDate, .directoryNotEmpty]) { step in
                    // A file the store changed since it was downloaded stays (see `uploadDeletion`).
                    if item.storeChangedSinceDownload { throw FileProviderError.versionOutOfDate(item.identifier) }
                    try await step.send {
                        try await backend.deleteItem(
                            identifier: item.identifier, baseVersion: item.kind == .folder ? nil : item.version, options: [])
                    }
                }
            } catch  where error.code == .noSuchItem {
                // Already gone from the store.
            } catch  where error.code == .versionOutOfDate || error.code == .directoryNotEmpty {
                kept = true
            }
        }
        // Bottom-up a page at a time, in reverse path order (every item before its folder): a
        // subtree of any size in bounded memory. The records stay until the end, so each item's
        // folder is still there to be asked whether it is dataless.
        try await RecordReader(context: context).forEachSubtreePage(below: record.path, deepestFirst: true) {
            page throws(FileProviderError) in
            // What was in dataless folders was never in the replica: its user did not see it.
            let folders = Set(page.map { RelativePath($0.path).parent })
            let dataless = try await context.executor.run {
                var dataless: Set<String> = []
                for folder in folders {
                    if try store.item(domainID: domainID, path: folder)?.isDataless == true { dataless.insert(folder) }
                }
                return dataless
            }
            for item in page where !dataless.contains(RelativePath(item.path).parent) { try await delete(item) }
            return true
        }
        try await delete(record)
        // Forget the subtree: what the store kept comes back as new items with this sync's listing.
        try await context.executor.runToCompletion { try store.deleteSubtree(domainID: domainID, path: record.path) }
        if kept { try await conflicts.folderDeletionKeptItems(record, report: &report) }
        report.uploaded += 1
    }
}
