import Foundation
import ProviderCore
import ProviderStore

/// Places what one folder's listing (or a batch of the change feed) says into the replica and
/// the pass: new items as placeholders or dataless folders (or in the database only, when the
/// folder is dataless), changed items moved or rewritten where they now belong, a dataless
/// folder populated when it must hold something; the records go to the pass's batches.
struct FolderPlacer: Sendable {
    let context: DomainContext
    /// Populates a dataless folder and the dataless folders above it (the caller holds the tree lock).
    let populateFolder: @Sendable (String) async throws(FileProviderError) -> Void

    var domain: DomainRecord { context.domain }
    var domainID: Int64 { context.domainID }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func display(_ path: String) -> String { context.display(path) }

    /// One item of a folder as the store has it now: its new path and, when the database knew
    /// it, its record.
    typealias Entry = (item: Item, path: String, old: ItemRecord?)

    /// Writes a folder's new and changed items into the replica (when the folder is populated)
    /// and queues their records. `complete` says that `entries` is the folder's whole listing
    /// (a walk), so a dataless folder can be populated from it; otherwise (a change feed) a
    /// folder that must be populated is populated from the database first. Returns the
    /// subfolders; `visit` ends with the folder as it is now (populated, written to the replica).
    /// `mustHold` says that an entry's stored record is one the folder must be populated for
    /// (``mustHold(_:)``).
    func place(
        _ entries: consuming [Entry], mustHold: Bool, in visit: inout FolderVisit, complete: Bool, pass: inout PullPass,
        report: inout SyncReport
    )
        async throws(FileProviderError) -> [FolderVisit]
    {
        var folder = visit.record
        defer { visit.record = folder }
        let wasPopulated = !folder.isDataless
        // A folder's deferred record goes with its own listing, once (below, unless a
        // population queues it first).
        var queuedFolder = false
        defer { visit.recordPending = false }

        // Whether this folder's items are in the replica: it is populated, or becomes so now
        // (a new folder within the budget, a folder in a pinned folder, or a folder that must
        // receive a downloaded file or a populated folder moved into it).
        var populated = !folder.isDataless
        var populatedBefore = populated
        if !populated && !complete {
            let withinBudget = visit.isNew && visit.isOnDisk && pass.budget >= entries.count
            if mustHold || pass.isPinned(folder) {
                try await pass.flush(to: context, wait: true)
                try await populateFolder(folder.path)
                folder = try await stored(folder)
                (populated, populatedBefore) = (true, true)
            } else if withinBudget {
                // A new folder: the feed brings all its items.
                pass.budget -= entries.count
                populated = true
                folder.isDataless = false
                pass.upserts.append(folder)
                queuedFolder = true
                populatedBefore = true
            }
        }
        if !populated {
            let pinned = pass.isPinned(folder)
            let withinBudget = visit.isNew && visit.isOnDisk && pass.budget >= entries.count
            if mustHold || pinned || withinBudget {
                if !visit.isOnDisk {
                    try await pass.flush(to: context, wait: true)
                    try await populateFolder(RelativePath(folder.path).parent)
                    visit.isOnDisk = true
                    folder = try await stored(folder)
                }
                if withinBudget && !mustHold && !pinned { pass.budget -= entries.count }
                populated = true
                folder.isDataless = false
                pass.upserts.append(folder)
                queuedFolder = true
            }
        }
        if visit.recordPending { pass.queuePendingFolder(folder, alreadyQueued: queuedFolder) }

        var subfolders: [FolderVisit] = []
        var placeholders: [ItemRecord] = []
        var newFolders: [ItemRecord] = []
        // Taken out of the list one by one, in order (reversed, then from the end): each entry
        // is moved, not copied and released (a first sync places a million).
        entries.reverseByMoving()
        while let (item, path, old) = entries.popLast() {
            guard let old else {
                var record = ItemRecord(domainID: domainID, item: item, path: path)
                if item.kind == .folder {
                    record.isDataless = true
                    pass.newFolders.insert(item.identifier)
                    if populated {
                        newFolders.append(record)
                    } else {
                        if !pass.defersFolderRecords { pass.upserts.append(record) }
                        subfolders.append(
                            FolderVisit(record: record, isOnDisk: false, isNew: true, recordPending: pass.defersFolderRecords))
                    }
                } else {
                    if item.kind == .file {
                        if pass.isPinned(record) { pass.redownload.append(record) }
                        if !item.version.content.isEmpty {
                            pass.newFilesByVersion?[item.version.content, default: []].append(item.identifier)
                        }
                    }
                    // The record's last use: moved into the list, not copied.
                    if populated { placeholders.append(consume record) } else { pass.upserts.append(consume record) }
                }
                report.added += 1
                continue
            }
            var record = old
            record.update(from: item, path: path)
            // A new identifier: the store replaced the item by a new one of the same name
            // (``pairReplaced(_:gone:)``); the record is re-keyed, its local copy kept.
            let replaced = old.identifier != item.identifier
            let changed =
                replaced || old.path != path || old.version != item.version || old.filename != item.filename
                || old.parentIdentifier != folder.identifier || old.fileSystemFlags != record.fileSystemFlags
            if changed || !populatedBefore && populated {
                do {
                    try await placeLocalCopy(of: old, as: &record, inPopulatedFolder: populated)
                } catch {
                    report.skip(path, "not updated: \(error.message)", notice: "\(display(path)): not updated: \(error.message)")
                    if item.kind == .folder { pass.failedFolders.append(old.path) }
                    continue
                }
                if changed { report.updated += 1 }
                pass.noteMove(from: old, to: record)
                if try await isUnkeptUpload(old, now: item) {
                    // Not downloaded over: the file counts as changed here, and the next sync
                    // sends it against the store's version (a conflict: both are kept).
                    record.markContentsPending()
                    report.notices.append(
                        "\(display(path)): the store lists another version than the one it took from this replica; the local file is kept and sent again"
                    )
                } else if record.isOutdated {
                    pass.redownload.append(record)
                }
                if replaced { pass.replaced.append((old: old.identifier, new: record.identifier, kind: record.kind)) }
                pass.upserts.append(record)
            }
            if item.kind == .folder {
                subfolders.append(FolderVisit(record: record, isOnDisk: populated, isNew: false))
            }
        }

        // New folders, then new placeholders, written in parallel.
        if !newFolders.isEmpty {
            // A change feed names a new folder's items only if it has some: an empty one is
            // never placed again, so it is populated (empty) now, within the budget.
            if !complete {
                for index in newFolders.indices where pass.budget > 0 {
                    newFolders[index].isDataless = false
                    pass.budget -= 1
                }
            }
            let statuses = newFolders.map { FolderStatus.of(dataless: $0.isDataless, policy: pass.isPinned($0) ? .eager : nil) }
            let creation = FolderCreation.start(
                newFolders.map(\.path), statuses: statuses, in: context, after: complete ? pass.lastCreation : nil)
            if complete {
                // A walk lists the new folders while they are made, and waits for each when it
                // places its items (``settle(_:pass:report:)``); their records go with them.
                pass.lastCreation = creation
                for (index, record) in newFolders.enumerated() {
                    subfolders.append(
                        FolderVisit(record: record, isOnDisk: true, isNew: true, recordPending: true, creation: creation.slot(index)))
                }
            } else {
                let made = await creation.task.value
                for (index, var record) in newFolders.enumerated() {
                    switch made[index] {
                    case .success(let inode):
                        record.localInode = inode
                        if !pass.defersFolderRecords { pass.upserts.append(record) }
                        subfolders.append(
                            FolderVisit(record: record, isOnDisk: true, isNew: true, recordPending: pass.defersFolderRecords))
                    case .failure(let error):
                        skipUnmade(record, error, report: &report)
                    }
                }
            }
        }
        if !placeholders.isEmpty {
            let errors = await writePlaceholders(placeholders, creating: true)
            for (index, record) in placeholders.enumerated() {
                if let error = errors[index] {
                    report.added -= 1
                    report.skip(record.path, error.message, notice: "\(display(record.path)): \(error.message)")
                } else {
                    pass.upserts.append(record)
                }
            }
        }
        // Populated now (or the root, whose status no population writes): it says so.
        if populated && (!wasPopulated || folder.path.isEmpty) && replica.layout.writesFolderStatus {
            let (replica, name, path) = (self.replica, domain.name, folder.path)
            let status = FolderStatus.of(dataless: false, policy: pass.isPinned(folder) ? .eager : nil)
            try await executor.run { FolderStatus.write(status, on: path, in: replica, domain: name) }
        }
        // Made dataless by this sync and marked then (``NewDatalessFolders``): populated now,
        // with its items on disk, so opening it need not wait any more.
        if populated && visit.isNew && context.newDatalessFolders.isListening {
            let (watchers, name, path) = (context.newDatalessFolders, domain.name, folder.path)
            try await executor.run { watchers.filled(domain: name, paths: [path]) }
        }
        // A batch goes as soon as the database is idle (so little is left to write when the
        // walk ends); the walk waits for it only when the backlog is full.
        if pass.upserts.count >= PullPass.backlog || (pass.upserts.count >= PullPass.batchSize && pass.isWriterIdle) {
            try await pass.flush(to: context)
        }
        return subfolders
    }

    /// Waits for `visit`'s folder to be made in the replica when the walk listed it while it
    /// was (``FolderVisit/creation``), and gives its record the folder's inode. Returns `false`
    /// when it could not be made: reported as a skipped item, not recorded (its items neither),
    /// and its parent's listing digest is dropped, since the parent's rows no longer match it.
    func settle(_ visit: inout FolderVisit, pass: inout PullPass, report: inout SyncReport) async -> Bool {
        guard let slot = visit.creation else { return true }
        visit.creation = nil
        switch await slot.result() {
        case .success(let inode):
            visit.record.localInode = inode
            return true
        case .failure(let error):
            skipUnmade(visit.record, error, report: &report)
            pass.digestsAwaitingSubfolders[visit.record.parentIdentifier] = nil
            return false
        }
    }

    /// Reports a new folder the replica could not make as skipped, and not added.
    private func skipUnmade(_ record: ItemRecord, _ error: FileProviderError, report: inout SyncReport) {
        report.added -= 1
        report.skip(record.path, error.message, notice: "\(display(record.path)): \(error.message)")
    }

    /// Pairs new entries (no stored record of their identifier) with stored items of the same
    /// kind that are gone from the same path (`gone`, by bytes): the store replaced the item by
    /// a new one of the same name (deleted and made again, a new identifier; or a store that
    /// hands out new identifiers). Each pair is placed as a change of the stored item, re-keyed
    /// to the new identifier: its local copy stays where it is (a placeholder is rewritten, a
    /// downloaded file is downloaded again, or kept beside the new one when it holds edits)
    /// rather than being removed as a deletion's after the new item's was written in its place.
    /// Returns the identifiers of the stored items paired (taken out of `gone` by the caller)
    /// and whether one of them must be held (``mustHold(_:)``).
    static func pairReplaced(_ entries: inout [Entry], gone: [ItemRecord]) -> (paired: Set<ItemIdentifier>, mustHold: Bool) {
        var byPath: [[UInt8]: Int] = [:]
        for (index, record) in gone.enumerated() where !record.path.isEmpty { byPath[Array(record.path.utf8)] = index }
        if byPath.isEmpty { return ([], false) }
        var paired = Set<ItemIdentifier>()
        var mustHold = false
        for index in entries.indices where entries[index].old == nil {
            guard let found = byPath.removeValue(forKey: Array(entries[index].path.utf8)) else { continue }
            let record = gone[found]
            guard record.kind == entries[index].item.kind, record.identifier != entries[index].item.identifier else { continue }
            entries[index].old = record
            paired.insert(record.identifier)
            if Self.mustHold(record) { mustHold = true }
        }
        return (paired, mustHold)
    }

    /// Gives the children of folders the store replaced (``PullPass/replaced``) their new parent
    /// in the database, before those folders are listed or their changes placed.
    /// - Throws: `localIOFailure` when the database fails.
    func reparentReplacedFolders(_ replaced: ArraySlice<(old: ItemIdentifier, new: ItemIdentifier, kind: ItemKind)>)
        async throws(FileProviderError)
    {
        let folders = replaced.filter { $0.kind == .folder }
        if folders.isEmpty { return }
        let (store, domainID) = (self.store, self.domainID)
        try await context.blocking { () throws(FileProviderError) in
            for folder in folders { try store.reparentChildren(domainID: domainID, from: folder.old, to: folder.new) }
        }
    }

    /// Whether the store lists, at another version and size, a file this replica sent and no
    /// listing has shown since: the store took the upload and did not keep it (or went back),
    /// and a download would replace the only copy of those bytes. (The same size is taken for
    /// the same bytes under a version the store renamed.) Reads the database only for a file
    /// that is downloaded and in sync whose version changed.
    /// - Throws: `localIOFailure` when the database fails.
    private func isUnkeptUpload(_ old: ItemRecord, now item: Item) async throws(FileProviderError) -> Bool {
        guard old.kind == .file, old.state == .materialized, old.localContentVersion == old.contentVersion,
            item.version.content != old.contentVersion, item.size != old.size
        else { return false }
        let (store, domainID) = (self.store, self.domainID)
        let upload = try await context.blocking { () throws(FileProviderError) in
            try store.unconfirmedUpload(domainID: domainID, identifier: old.identifier)
        }
        return upload?.contentVersion == old.contentVersion
    }

    /// Whether a dataless folder must be populated to take an item the database knew as
    /// `old`: a downloaded file or a populated folder. Callers ask it while they gather the
    /// entries (iterating them again would copy each one: a first sync places a million).
    static func mustHold(_ old: ItemRecord) -> Bool {
        old.state == .materialized || (old.kind == .folder && !old.isDataless)
    }

    /// Puts an item that changed in the store (renamed, moved, new version) where it now
    /// belongs in the replica, from wherever its local copy is: moved along when it is on disk
    /// and its folder is populated, written fresh when only the new place is populated, removed
    /// when only the old one was. Blocking parts run on the executor.
    private func placeLocalCopy(
        of old: ItemRecord, as record: inout ItemRecord, inPopulatedFolder populated: Bool
    )
        async throws(FileProviderError)
    {
        let replica = self.replica
        let name = domain.name
        let oldCopy = try await executor.run { [self, path = record.path] in
            if localCopyExists(old) { return true }
            // Below a folder whose move took it along (a walk lists the folder's stored
            // children at their old paths): its file or folder is at its new path already, the
            // same inode (``moveLocalCopy(of:to:)`` leaves it there). A placeholder is written
            // anew below; anything else at the new path is not this item's copy.
            guard old.path != path, old.state == .materialized || old.state == .folder, let inode = old.localInode,
                replica.fingerprint(atPath: replica.path(path))?.inode == inode
            else { return false }
            var there = old
            there.path = path
            return localCopyExists(there)
        }
        switch (oldCopy, populated) {
        case (true, true):
            if old.path != record.path {
                try await executor.run { [self, record] in try moveLocalCopy(of: old, to: record) }
            } else if record.state == .placeholder || record.state == .symlink {
                let metadata = PlaceholderMetadata(domain: name, record: record)
                try await executor.run { [record] in try replica.writePlaceholder(record.path, metadata) }
            } else if record.state == .materialized, old.isExecutable != record.isExecutable, !record.isOutdated {
                // The store's executable bit changed (a metadata change): the file follows.
                let (target, flags) = (replica.path(record.path), record.flags)
                try await executor.run {
                    if let print = replica.fingerprint(atPath: target), print.isRegularFile {
                        try replica.applyFlags(flags, toPath: target, current: print.permissions)
                    }
                }
            }
        case (false, true):
            switch record.kind {
            case .folder:
                // Its items were not in the replica: it comes back dataless.
                let (path, watchers, name) = (record.path, context.newDatalessFolders, domain.name)
                record.isDataless = true
                let (store, domainID, made) = (self.store, self.domainID, record)
                let inode = try await executor.run { () throws -> Int64? in
                    try replica.makeFolder(path)
                    watchers.made(domain: name, paths: [path])
                    FolderStatus.write(made, in: replica, domain: name, store: store, domainID: domainID)
                    return replica.fingerprint(atPath: replica.path(path))?.inode
                }
                record.localInode = inode
            case .file, .symlink:
                if record.state == .materialized { record.markPlaceholder() }
                let metadata = PlaceholderMetadata(domain: name, record: record)
                try await executor.run { [record] in try replica.writePlaceholder(record.path, metadata) }
            }
        case (true, false):
            // Only placeholders and empty dataless folders get here (see `take`).
            _ = try await executor.run { [self] in try removeLocalCopy(of: old) }
            if record.kind == .folder { record.isDataless = true }
        case (false, false):
            if record.kind == .folder { record.isDataless = true }
        }
    }

    /// A folder's record as the database has it now (after a population), read on the engine's
    /// threads; the record given when the database has none.
    /// - Throws: `localIOFailure` when the database fails.
    private func stored(_ folder: ItemRecord) async throws(FileProviderError) -> ItemRecord {
        let (store, domainID) = (self.store, self.domainID)
        return try await context.blocking { () throws(FileProviderError) in
            try store.item(domainID: domainID, identifier: folder.identifier) ?? folder
        }
    }

    /// Whether an item's local copy (its file, placeholder or folder) is in the replica.
    /// Blocking.
    func localCopyExists(_ record: ItemRecord) -> Bool {
        switch record.state {
        case .placeholder, .symlink:
            return replica.placeholderExists(record.path)
        case .materialized:
            return replica.fingerprint(atPath: replica.path(record.path))?.isRegularFile == true
                && replica.placeholderUnderItsName(record.path) == nil
        case .folder: return replica.fingerprint(atPath: replica.path(record.path))?.isDirectory == true
        }
    }

    func writePlaceholders(_ records: [ItemRecord], creating: Bool) async -> [Int: FileProviderError] {
        await context.writePlaceholders(records, creating: creating)
    }

    func moveLocalCopy(of old: ItemRecord, to new: ItemRecord) throws(FileProviderError) {
        try context.moveLocalCopy(of: old, to: new)
    }

    func removeLocalCopy(of record: ItemRecord) throws(FileProviderError) -> Bool {
        try context.removeLocalCopy(of: record)
    }
}
