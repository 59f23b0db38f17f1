import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// The parent path and name of a relative path.
    static func split(_ path: String) -> (parent: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("", path) }
        return (String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    /// Whether the relative path `path` is `folder` or below it ("" is the root, above everything).
    static func isAtOrBelow(_ path: String, _ folder: String) -> Bool {
        folder.isEmpty || path == folder || path.hasPrefix(folder + "/")
    }

    /// Sends local changes in the replica to the store (sync up): creations, edits, moves and
    /// deletions, each written to the journal before it runs and marked done after.
    ///
    /// Conflicts keep both versions and are logged. One bad item never stops the rest.
    ///
    /// When the task is cancelled no operation starts; the running ones end (their journal
    /// entries stay pending, so the next sync replays them with `mayAlreadyExist`), and
    /// `report.unsent` counts the changes found but not sent.
    /// - Throws: the error of the first operation whose code makes the whole domain back off
    ///   (`serverUnreachable`, `notAuthenticated`, `insufficientQuota`); the rest waits for the
    ///   next sync. `cancelled` when the task is cancelled. `localIOFailure` when the database
    ///   fails.
    ///
    /// With `changes` (a watcher's record of the folders that changed), only those folders are
    /// compared (``ScanScope``); when this push sent something or did not finish (it throws, a
    /// change fails or conflicts, a file is still being written), the folders are given back
    /// for the next sync to compare again.
    func push(report: inout SyncReport, settleSeconds: Double, changes: ChangedFolders? = nil) async throws(FileProviderError) {
        let started = Date()
        defer { report.phases.upload += Date().timeIntervalSince(started) }
        var scope = await changes?.take() ?? .all
        let (notices, conflicts, uploaded) = (report.notices.count, report.conflicts, report.uploaded)
        var finished = false
        defer {
            // A change sent may leave one for the next comparison there (a file moved and
            // edited is sent as a move, its contents as an edit found next time).
            if let changes,
                !finished || report.notices.count > notices || report.conflicts > conflicts || !report.pendingLocal.isEmpty
                    || report.uploaded > uploaded
            {
                changes.putBack(scope)
            }
        }
        try await compareAndSend(report: &report, settleSeconds: settleSeconds, scope: &scope, changes: changes)
        finished = true
    }

    /// The passes of ``push(report:settleSeconds:changes:)`` over `scope`, which becomes
    /// ``ScanScope/all`` once a folder move re-keyed items.
    private func compareAndSend(
        report: inout SyncReport, settleSeconds: Double, scope: inout ScanScope, changes: ChangedFolders?
    ) async throws(FileProviderError) {
        let replica = self.replica
        _ = try? await executor.run { replica.removeComparisonCopies() }
        // Old identifiers of items a folder move re-keyed in an earlier pass, to their new ones: a
        // placeholder the user moved before the folder move was sent still carries the old one.
        var renamed: [String: String] = [:]
        var changingScans = 0
        // Passes: a folder move ends a pass (see below); what is left waits for the next sync.
        for _ in 0..<8 {
            let settleNanos = Int64(settleSeconds * 1e9)
            let finished = settleNanos > 0 ? finishedWrites.current(maximumAge: settleSeconds) : [:]
            var scanner = LocalScanner(
                replica: replica, domain: domain.name, ignore: ignoreRules, settleNanos: settleNanos, renamedIdentifiers: renamed,
                finishedWrites: finished)
            scanner.folderRead = folderScanned.withLock { $0 }
            // Folder by folder against the database, on the executor (files and SQLite block).
            let records = StoreScanRecords(store: store, domainID: domainID)
            let passScope = scope
            var result = try await executor.run { [scanner] in try scanner.scan(records, scope: passScope) }
            if result.replicaChangedDuringScan {
                // What looks deleted may have moved into a folder read earlier: scan again once
                // the replica holds still; if it never does, deletions wait for the next sync.
                if changingScans < Self.scansOfAChangingReplica.count {
                    try? await Task.sleep(for: Self.scansOfAChangingReplica[changingScans])
                    changingScans += 1
                    // Where it moved to changed meanwhile: the watcher has seen it.
                    if let changes { scope.formUnion(await changes.take()) }
                    continue
                }
                let waiting = result.changes.filter(\.isDeletion).count + result.strayPlaceholders.count
                result.changes.removeAll(where: \.isDeletion)
                result.strayPlaceholders = []
                report.notices.append(
                    "\(domain.name): the replica changed during each of \(changingScans + 1) comparisons: \(waiting) deletion\(waiting == 1 ? "" : "s") wait for the next sync"
                )
            }
            if !result.occupiedDataless.isEmpty {
                // Made in folders that were not populated yet: populate them, then compare.
                for path in result.occupiedDataless { try await populateFolder(path, ancestors: true) }
                continue
            }
            report.pendingLocal = result.unsettled
            try await tidy(result)
            if result.changes.isEmpty {
                // Nothing left to send: an unfinished entry can no longer be replayed.
                if result.unsettled.isEmpty && scope.everything { try closeStaleJournalEntries() }
                break
            }
            let ordered = Self.order(result.changes)
            // A file moved and edited goes as a move; its contents, as an edit the next scan finds.
            let movedAndEdited = ordered.contains { change in
                guard case .moved(let record, _, let print?) = change, record.state == .materialized else { return false }
                return print.size != record.localSize || print.modificationNanos != record.localModificationNanos
            }
            var changedFolderTree = false
            var index = ordered.startIndex
            while index < ordered.endIndex {
                // After a folder moved, the records below it have new paths and identifiers: the
                // rest is computed again by the next scan, against the re-keyed records (a stale
                // record would send a move or deletion to an identifier that no longer exists).
                if changedFolderTree { break }
                if Task.isCancelled {
                    report.unsent += ordered.endIndex - index
                    throw DomainController.notStarted
                }
                // New files and edits do not depend on each other: several go at once.
                var end = index
                while end < ordered.endIndex && Self.isIndependent(ordered[end]) { end += 1 }
                if end > index {
                    do {
                        try await sendTogether(Self.spreadOverFolders(ordered[index..<end]), report: &report)
                    } catch where error.code == .cancelled {
                        report.unsent += ordered.endIndex - end
                        throw error
                    }
                    index = end
                    continue
                }
                let change = ordered[index]
                index += 1
                do {
                    if case .moved(let record, let to, _) = change, record.kind == .folder {
                        let before = try store.descendants(domainID: domainID, of: record.path)
                        if try await send(change, report: &report) {
                            changedFolderTree = true
                            try noteRenamedIdentifiers(from: [record] + before, oldPath: record.path, newPath: to, into: &renamed)
                        }
                    } else {
                        try await send(change, report: &report)
                    }
                } catch where error.code == .cancelled {
                    report.unsent += ordered.endIndex - index + 1
                    throw error
                }
            }
            try? store.pruneJournal(domainID: domainID)
            // A moved folder re-keys everything below it: scan again for edits made inside it.
            if changedFolderTree {
                scope = .all
                continue
            }
            if !movedAndEdited { break }
        }
    }

    /// How long push lets the replica hold still before each new scan, when the last one saw
    /// folders change while it would delete something.
    static let scansOfAChangingReplica: [Duration] = [.milliseconds(10), .milliseconds(50), .milliseconds(250)]

    /// Adds the identifiers a folder move gave the items below it (matched by path) to `renamed`.
    private func noteRenamedIdentifiers(from old: [ItemRecord], oldPath: String, newPath: String, into renamed: inout [String: String])
        throws(FileProviderError)
    {
        var now: [String: String] = [:]
        if let folder = try store.item(domainID: domainID, path: newPath) { now[""] = folder.identifier.rawValue }
        for record in try store.descendants(domainID: domainID, of: newPath) {
            now[String(record.path.dropFirst(newPath.count))] = record.identifier.rawValue
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

    /// Records evictions and downloads the scan found unrecorded and removes placeholders no
    /// item owns.
    private func tidy(_ result: LocalScanResult) async throws(FileProviderError) {
        if !result.placed.isEmpty {
            // A download placed but not recorded may still have its placeholder beside it (its
            // process died before removing it): the item's file is there, so it goes.
            let replica = self.replica
            let leftovers = result.placed.filter { $0.record.state == .placeholder }.map(\.record)
            try await executor.run {
                for record in leftovers where replica.isPlaceholder(of: record.identifier, at: record.path) {
                    try replica.removePlaceholder(record.path)
                }
            }
            try store.recordPlacedDownloads(domainID: domainID, result.placed.map(\.download))
        }
        if !result.evicted.isEmpty {
            try store.apply(
                domainID: domainID,
                upserts: result.evicted.map { record in
                    var record = record
                    record.markPlaceholder()
                    return record
                }, deletions: [])
        }
        if !result.strayPlaceholders.isEmpty {
            let replica = self.replica
            try await executor.run {
                for path in result.strayPlaceholders { try replica.removePlaceholder(path) }
            }
        }
    }

    /// How many new files and edits go to the store at once.
    public static let uploadDepth = 4

    /// Whether a change can go beside others of its kind: a new file or an edit (new folders,
    /// moves and deletions change the tree others rely on and go one by one).
    static func isIndependent(_ change: LocalChange) -> Bool {
        switch change {
        case .created(_, let kind, _): return kind != .folder
        case .modified: return true
        case .writtenOverPlaceholder, .moved, .deleted: return false
        }
    }

    /// Fields of a file's contents: when the store reports one still pending, the contents go
    /// again with a later sync.
    static let contentFields: ItemFields = [.contents, .contentModificationDate]

    /// Sends one change. A failure that backs the whole domain off, and a cancellation, are
    /// thrown; any other is noted on the item, and the next sync tries again. Returns whether it
    /// worked.
    @discardableResult
    private func send(_ change: LocalChange, report: inout SyncReport) async throws(FileProviderError) -> Bool {
        do {
            try await upload(change, report: &report)
            return true
        } catch where error.code.reaction == .backOffDomain || error.code == .cancelled {
            throw error
        } catch {
            report.notices.append("\(display(change.path)): not uploaded: \(error.message)")
            if var record = try? store.item(domainID: domainID, path: change.path) {
                record.lastError = error.message
                try? store.save(record)
            }
            return false
        }
    }

    /// Sends independent changes ``uploadDepth`` at a time, their journal entries opened and
    /// finished in batches (``JournalBatch``). The first failure that backs the domain off, or a
    /// cancellation of the task, stops what has not started (its journal entries are given
    /// back) and is thrown once the running ones ended; `report.unsent` counts the changes of
    /// this batch that were not sent then.
    /// - Throws: that failure (`cancelled` for a cancellation); else `localIOFailure` when the
    ///   journal could not be written.
    private func sendTogether(_ changes: [LocalChange], report: inout SyncReport) async throws(FileProviderError) {
        let batch = JournalBatch(store: store)
        let domainID = self.domainID
        let (outcomes, notStarted, stopped) = await JournalBatch.$current.withValue(batch) {
            await withTaskGroup(of: (SyncReport, FileProviderError?).self) { group in
                var next = changes.startIndex
                var opened = changes.startIndex
                var running = 0
                var stop: FileProviderError?
                func startNext() -> Bool {
                    if stop == nil && Task.isCancelled { stop = DomainController.notStarted }
                    guard stop == nil, next < changes.endIndex else { return false }
                    if next == opened {
                        opened = min(next + JournalBatch.size, changes.endIndex)
                        do throws(FileProviderError) {
                            try batch.open(changes[next..<opened].map { Self.journalKey(of: $0).entry(domainID: domainID) })
                        } catch {
                            stop = error
                            return false
                        }
                    }
                    let change = changes[next]
                    next += 1
                    group.addTask { [self] in
                        var part = SyncReport(domain: domain.name)
                        do throws(FileProviderError) {
                            try await send(change, report: &part)
                            return (part, nil)
                        } catch {
                            return (part, error)
                        }
                    }
                    return true
                }
                while running < Self.uploadDepth, startNext() { running += 1 }
                var outcomes: [(SyncReport, FileProviderError?)] = []
                while let outcome = await group.next() {
                    running -= 1
                    outcomes.append(outcome)
                    if let error = outcome.1, stop == nil { stop = error }
                    if startNext() { running += 1 }
                }
                return (outcomes, changes.endIndex - next, stop)
            }
        }
        var failure: FileProviderError?
        for (part, error) in outcomes {
            report.uploaded += part.uploaded
            report.conflicts += part.conflicts
            report.notices += part.notices
            if error?.code == .cancelled { report.unsent += 1 }
            if failure == nil { failure = error }
        }
        report.unsent += notStarted
        failure = failure ?? stopped
        do {
            try batch.close()
        } catch {
            failure = failure ?? error
        }
        if let failure { throw failure }
    }

    /// The journal key of a change ``isIndependent(_:)`` lets go beside others.
    private static func journalKey(of change: LocalChange) -> JournalKey {
        switch change {
        case .created(let path, let kind, _): return .create(path: path, kind: kind)
        case .modified(let record, _): return .modify(record)
        case .writtenOverPlaceholder(let record, _): return .create(path: record.path, kind: .file)
        case .moved(let record, let to, _): return .move(record, to: to)
        case .deleted(let record): return .delete(record)
        }
    }

    /// The changes taken from their folders in turn (one from each folder, then the next from
    /// each), each folder's in their order, so that the changes sent at once go to different
    /// folders.
    ///
    /// Creating an entry holds its folder's lock on the server's file system while a free inode
    /// is found; on ext4 without a journal that search steps over every inode freed in the last
    /// minute or more. Creations sent at once into one folder then wait for each other there,
    /// and the waiters spin on the lock, taking a core from the work that could go on.
    static func spreadOverFolders(_ changes: ArraySlice<LocalChange>) -> [LocalChange] {
        var folders: [String: Int] = [:]
        var queues: [[LocalChange]] = []
        for change in changes {
            let parent = split(change.path).parent
            if let index = folders[parent] {
                queues[index].append(change)
            } else {
                folders[parent] = queues.count
                queues.append([change])
            }
        }
        if queues.count < 2 { return Array(changes) }
        var spread: [LocalChange] = []
        spread.reserveCapacity(changes.count)
        var round = 0
        while spread.count < changes.count {
            for queue in queues where round < queue.count { spread.append(queue[round]) }
            round += 1
        }
        return spread
    }

    /// New folders first (parents first), then moves, new files, edits, and deletions.
    static func order(_ changes: [LocalChange]) -> [LocalChange] {
        func rank(_ change: LocalChange) -> Int {
            switch change {
            case .created(_, .folder, _): return 0
            case .moved: return 1
            case .created: return 2
            case .modified, .writtenOverPlaceholder: return 3
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
        case .writtenOverPlaceholder(let record, let fingerprint):
            // A program saw a dataless file under its real name, with its size, and replaced
            // it (emptied it while opening it, or renamed a new file over it): an edit of the
            // item, based on the version the file stood for. A `.placeholder` file's name was
            // never the item's: what is written there is kept beside it.
            if replica.layout == .dataless {
                try await uploadEdit(record, fingerprint: fingerprint, report: &report)
            } else {
                try await keepWrittenOverPlaceholder(record, fingerprint: fingerprint, report: &report)
            }
        case .moved(let record, let to, let fingerprint):
            try await uploadMove(record, to: to, fingerprint: fingerprint, report: &report)
        case .deleted(let record):
            try await uploadDeletion(record, report: &report)
        }
    }

    // MARK: Journal

    /// Runs `body` as a journalled operation. An error whose code is in `handled` is resolved by
    /// the caller (a conflict kept both versions, the item was already gone), so its entry is
    /// closed: a stale unfinished entry would turn a later, unrelated operation with the same
    /// key into a replay.
    ///
    /// Except on a replay, for a code in `resolvedOnReplay`: there the caller first tells the
    /// earlier attempt's own work from someone else's change (the store already holds the
    /// edit's bytes, the item already stands at its new place), which takes a download or a
    /// listing. The entry stays open (`pending`) until the caller closes it with what it found
    /// (``JournalStep/finish(saving:)`` or ``JournalStep/close()``): a process killed meanwhile
    /// replays again, where a closed entry would make the next attempt take its own upload for
    /// a conflict (a conflicted copy) or its own move for a deletion in the store (a duplicate).
    private func journalled<T>(
        _ key: JournalKey, handled: Set<FileProviderError.Code> = [], resolvedOnReplay: Set<FileProviderError.Code> = [],
        _ body: (JournalStep) async throws -> T
    ) async throws(FileProviderError) -> T {
        let batch = JournalBatch.current
        var (entry, replay): (JournalEntry, Bool)
        if let opened = batch?.take(key.template) {
            (entry, replay) = opened
        } else {
            // One entry in, one out.
            (entry, replay) = try store.openJournalEntries([key.entry(domainID: domainID)])[0]
        }
        let step = JournalStep(store: store, entry: entry, replay: replay, batch: batch)
        do {
            let value = try await body(step)
            if !step.isFinished {
                entry.state = .done
                entry.lastError = nil
                try store.updateJournal(entry)
            }
            return value
        } catch {
            let error = FileProviderError.wrap(error)
            // Closed with its result already: nothing to undo.
            if step.isFinished { throw error }
            // Refused by the store on a first attempt: nothing was done, and the next attempt is
            // sent afresh (`failed`). Anything else may have reached the store (`pending`): the
            // next attempt is a replay. A replay that the store refuses stays a replay: the
            // attempt before it may still have reached the store. A replay's entry for a code in
            // `resolvedOnReplay` stays open for its caller to close.
            let resolved = handled.contains(error.code) && !(step.replay && resolvedOnReplay.contains(error.code))
            entry.state = resolved ? .done : step.wasRefused && !step.replay ? .failed : .pending
            entry.lastError = error.message
            try? store.updateJournal(entry)
            throw error
        }
    }

    /// Marks every unfinished journal entry done (used when the replica has no local changes).
    private func closeStaleJournalEntries() throws(FileProviderError) {
        for var entry in try store.unfinishedOperations(domainID: domainID) {
            entry.state = .done
            entry.lastError = "superseded: the replica had no local change left for it"
            try store.updateJournal(entry)
        }
        try store.pruneJournal(domainID: domainID)
    }

    // MARK: Creations

    /// - Parameter adopting: the item may already be in the store as our own (a folder merges
    ///   with a folder of the same name; a replayed move finds its file already there), so the
    ///   create runs with `mayAlreadyExist`.
    private func uploadCreation(
        path: String, kind: ItemKind, fingerprint: FileFingerprint, adopting: Bool = false, report: inout SyncReport
    )
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
        let domainID = self.domainID
        let store = self.store
        do {
            // The record is saved inside the journalled step: the entry is marked done only once
            // the database knows the item, so a crash in between replays with mayAlreadyExist
            // instead of meeting its own upload as a name collision.
            try await journalled(.create(path: path, kind: kind), handled: [.filenameCollision]) { step in
                let result = try await step.send {
                    try await backend.createItem(
                        basedOn: template, fields: [.contents, .filename, .parentItemIdentifier, .contentModificationDate],
                        contents: contents, options: step.replay || adopting ? [.mayAlreadyExist] : [])
                }
                var record = ItemRecord(domainID: domainID, item: result.item, path: path)
                record.parentIdentifier = parent.identifier
                record.localInode = fingerprint.inode
                if kind == .file {
                    record.markMaterialized(
                        contentVersion: result.shouldFetchContent ? nil : result.item.version.content, fingerprint: fingerprint)
                    if !result.stillPendingFields.isDisjoint(with: Self.contentFields) { record.markContentsPending() }
                }
                try step.finish(saving: record)
            }
        } catch where error.code == .filenameCollision && kind == .folder && !adopting {
            // A folder of that name is in the store already (made elsewhere, or by this replica
            // before a crash): the two merge, and their items are synced one by one.
            try await uploadCreation(path: path, kind: kind, fingerprint: fingerprint, adopting: true, report: &report)
            return
        } catch where error.code == .filenameCollision {
            // The name is taken in the store: the later item gets `name 2.ext`.
            let renamed = try await renameLocally(path, kind: kind) { ConflictName.numbered(name, $0) }
            try store.recordConflict(
                ConflictRecord(
                    domainID: domainID, path: path, keptPath: renamed, kind: "nameCollision",
                    details: "a new local item took a name the store already had; it was renamed"))
            report.conflicts += 1
            report.notices.append("\(display(path)): the name was taken in the store; uploaded as \(display(renamed))")
            guard let print = replica.fingerprint(atPath: replica.path(renamed)) else { return }
            try await uploadCreation(path: renamed, kind: kind, fingerprint: print, report: &report)
            return
        }
        report.uploaded += 1
    }

    /// Renames a local item to the first free name `makeName(2)`, `makeName(3)`, …; returns the
    /// new path. With `movingPlaceholder`, a placeholder that stands at `path` without a file
    /// (a moved placeholder) is what moves; without it, only the file does.
    /// - Throws: `localIOFailure` when there is nothing to move; `filenameCollision` when no name is free.
    private func renameLocally(
        _ path: String, kind: ItemKind, movingPlaceholder: Bool = true, makeName: @escaping @Sendable (Int) -> String
    ) async throws(FileProviderError) -> String {
        let (parentPath, _) = Self.split(path)
        let replica = self.replica
        let domainID = self.domainID
        let store = self.store
        return try await executor.run {
            for attempt in 2..<1000 {
                let candidate = parentPath.isEmpty ? makeName(attempt) : parentPath + "/" + makeName(attempt)
                if replica.fingerprint(atPath: replica.path(candidate)) != nil { continue }
                if replica.placeholderExists(candidate) { continue }
                if try store.item(domainID: domainID, path: candidate) != nil { continue }
                if movingPlaceholder, replica.placeholderExists(path),
                    replica.layout == .dataless || replica.fingerprint(atPath: replica.path(path)) == nil
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

    // MARK: Edits

    private func uploadEdit(_ record: ItemRecord, fingerprint: FileFingerprint, report: inout SyncReport) async throws(FileProviderError) {
        var item = record.item
        item.size = fingerprint.size
        item.contentModificationDate = Date(timeIntervalSince1970: Double(fingerprint.modificationNanos) / 1e9)
        let contents = replica.url(record.path)
        var attempt: JournalStep?
        do {
            // The edit is recorded inside the journalled step: the entry is marked done only once
            // the database knows it, so a crash in between replays instead of meeting its own
            // upload as a conflict.
            let handled: Set<FileProviderError.Code> = [.versionOutOfDate, .noSuchItem]
            try await journalled(.modify(record), handled: handled, resolvedOnReplay: [.versionOutOfDate]) { step in
                attempt = step
                // The edit's base is the version the file was downloaded as, not the record's
                // latest: a sync down that kept this file (download-only, or an edit made while
                // it ran) recorded the store's newer version. Sent with that one as its base,
                // the edit would silently replace the store's change: both edited, keep both.
                if record.storeChangedSinceDownload { throw FileProviderError.versionOutOfDate(record.identifier) }
                let result = try await step.send {
                    try await backend.modifyItem(
                        item, baseVersion: record.version, changedFields: [.contents, .contentModificationDate], contents: contents,
                        options: step.replay ? [.mayAlreadyExist] : [])
                }
                try await recordUploadedEdit(
                    record, now: result.item, contentVersion: result.shouldFetchContent ? nil : result.item.version.content,
                    fingerprint: fingerprint, pending: result.stillPendingFields, step: step)
            }
        } catch where error.code == .versionOutOfDate {
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
                try attempt.close()
            }
            try await keepBoth(record, report: &report)
            return
        } catch where error.code == .noSuchItem {
            // Edited here, deleted in the store: the edit wins and the item is created again.
            // A real file that replaced a placeholder now carries the item: the placeholder goes
            // first (a crash before the record is deleted finds the same edit again), else it
            // would be left beside the re-created file with no record of its own.
            if record.state == .placeholder {
                try await executor.run { [replica] in try replica.removePlaceholder(record.path) }
            }
            try store.apply(domainID: domainID, upserts: [], deletions: [record.identifier])
            try store.recordConflict(
                ConflictRecord(
                    domainID: domainID, path: record.path, keptPath: nil, kind: "editedAndDeleted",
                    details: "edited here and deleted in the store; uploaded again"))
            report.conflicts += 1
            try await uploadCreation(path: record.path, kind: .file, fingerprint: fingerprint, report: &report)
            return
        }
        report.uploaded += 1
    }

    /// Records an edit the store now holds: the item as the store has it, the local file as
    /// uploaded; a placeholder the real file replaced is removed.
    private func recordUploadedEdit(
        _ record: ItemRecord, now item: Item, contentVersion: Data?, fingerprint: FileFingerprint, pending: ItemFields = [],
        step: JournalStep? = nil
    )
        async throws(FileProviderError)
    {
        var updated = record
        updated.update(from: item, path: record.path)
        updated.markMaterialized(contentVersion: contentVersion, fingerprint: fingerprint)
        if !pending.isDisjoint(with: Self.contentFields) { updated.markContentsPending() }
        updated.lastError = nil
        if record.state == .placeholder {
            try await executor.run { [replica] in try replica.removePlaceholder(record.path) }
        }
        if let step { try step.finish(saving: updated) } else { try store.save(updated) }
    }

    /// The store's current item when its contents are byte for byte the local file's, else `nil`.
    /// Downloads the store's version to a staging file to compare; used only for replays.
    private func storeHoldsSameContents(_ record: ItemRecord, as local: URL) async throws(FileProviderError) -> Item? {
        let replica = self.replica
        let staging = replica.stagingPath(named: Downloader.stagingName(for: record.identifier) + ".compare")
        defer { try? replica.removeFile(atPath: staging) }
        let current: Item
        do {
            try await executor.run { try replica.prepareStagingFile(atPath: staging, truncate: true) }
            current = try await backend.fetchContents(
                for: record.identifier, version: nil, to: URL(fileURLWithPath: staging), offset: 0, progress: nil)
        } catch where error.code == .noSuchItem {
            return nil
        }
        let same = try await executor.run { () -> Bool in
            guard let a = FileManager.default.contents(atPath: staging), let b = FileManager.default.contents(atPath: local.path) else {
                return false
            }
            return a == b
        }
        return same ? current : nil
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
            ConflictRecord(
                domainID: domainID, path: record.path, keptPath: copyPath, kind: "bothEdited",
                details: "edited here and in the store; the local version was kept as a conflicted copy"))
        report.conflicts += 1
        report.notices.append("\(display(record.path)): edited on both sides; your version is \(display(copyPath))")
        // The original name now holds the store's version.
        let current = try await backend.item(for: record.identifier)
        var original = record
        original.update(from: current, path: record.path)
        original.markPlaceholder()
        let metadata = PlaceholderMetadata(domain: domain.name, record: original)
        try await executor.run { [replica, original] in try replica.writePlaceholder(original.path, metadata) }
        try store.save(original)
        if let print = replica.fingerprint(atPath: replica.path(copyPath)) {
            try await uploadCreation(path: copyPath, kind: .file, fingerprint: print, report: &report)
        }
        for outcome in await downloader.download([original], events: nil) {
            if let notice = outcome.notDownloadedNotice { report.notices.append(notice) }
        }
    }

    /// A real file written at the real name of an item that is not downloaded: its writer never
    /// saw the item's contents, so it is not an edit of them. The store's item keeps the name
    /// (its placeholder stays, or is written again) and the file becomes a conflicted copy,
    /// uploaded as a new item. Nothing is sent to the store's item. When the store no longer
    /// has the item, there is nothing to keep beside the file: it goes up under its name.
    private func keepWrittenOverPlaceholder(_ record: ItemRecord, fingerprint: FileFingerprint, report: inout SyncReport)
        async throws(FileProviderError)
    {
        do {
            _ = try await backend.item(for: record.identifier)
        } catch where error.code == .noSuchItem {
            try await executor.run { [replica] in try replica.removePlaceholder(record.path) }
            try store.apply(domainID: domainID, upserts: [], deletions: [record.identifier])
            try await uploadCreation(path: record.path, kind: .file, fingerprint: fingerprint, report: &report)
            return
        }
        let (_, name) = Self.split(record.path)
        let copyName = ConflictName.conflictedCopy(of: name)
        let metadata = PlaceholderMetadata(domain: domain.name, record: record)
        let replica = self.replica
        let copyPath = try await renameLocally(record.path, kind: .file, movingPlaceholder: false) { attempt in
            attempt == 2 ? copyName : ConflictName.numbered(copyName, attempt - 1)
        }
        try await executor.run {
            if !replica.placeholderExists(record.path) {
                try replica.writePlaceholder(record.path, metadata)
            }
        }
        try store.recordConflict(
            ConflictRecord(
                domainID: domainID, path: record.path, keptPath: copyPath, kind: "overwrotePlaceholder",
                details: "a file was written at the name of an item that was not downloaded; the store's item kept the name"))
        report.conflicts += 1
        report.notices.append(
            "\(display(record.path)): a file was written there without the item's contents; the store's version keeps the name, yours is \(display(copyPath))"
        )
        if let print = replica.fingerprint(atPath: replica.path(copyPath)) {
            try await uploadCreation(path: copyPath, kind: .file, fingerprint: print, report: &report)
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
        var attempt: JournalStep?
        do {
            // The move is recorded inside the journalled step: were the entry marked done before
            // the database knew the new place, a process killed in between would send the move
            // again, find the item gone from its old place and upload it as a duplicate. For the
            // same reason a replay's entry stays open until its adoption is decided (below).
            _ = try await journalled(
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
                    try await recordMove(record, to: path, now: result.item, parent: parent.identifier, fingerprint: fingerprint)
                }
                return result
            }
        } catch where error.code == .filenameCollision {
            if let attempt, attempt.replay {
                let adopted = try await adoptReplayedMove(record, to: path, name: name, parent: parent.identifier, fingerprint: fingerprint)
                try attempt.close()
                if adopted {
                    report.uploaded += 1
                    return
                }
            }
            // The new name is taken in the store: the later item gets `name 2.ext` and moves there.
            let renamed = try await renameLocally(path, kind: record.kind == .folder ? .folder : .file) { ConflictName.numbered(name, $0) }
            try store.recordConflict(
                ConflictRecord(
                    domainID: domainID, path: path, keptPath: renamed, kind: "nameCollision",
                    details: "a local item was moved to a name the store already had; it was renamed"))
            report.conflicts += 1
            report.notices.append("\(display(path)): the name was taken in the store; moved to \(display(renamed)) instead")
            try await uploadMove(record, to: renamed, fingerprint: fingerprint, report: &report)
            return
        } catch where error.code == .versionOutOfDate {
            // Moved here, changed in the store: keep both. The store's version stays where it
            // is and comes back with this sync's listing; a moved local file is uploaded as a new
            // item at its new place, a moved placeholder (no contents of its own) is dropped.
            try store.deleteSubtree(domainID: domainID, path: record.path)
            try relistNextSync()
            try store.recordConflict(
                ConflictRecord(
                    domainID: domainID, path: record.path, keptPath: path, kind: "movedAndEdited",
                    details: "moved here and changed in the store; the store's version stayed at the old place"))
            report.conflicts += 1
            if record.state == .placeholder || record.state == .symlink {
                try await executor.run { [replica] in try replica.removePlaceholder(path) }
                return
            }
            if let fingerprint {
                try await uploadCreation(
                    path: path, kind: record.kind == .folder ? .folder : .file, fingerprint: fingerprint, report: &report)
            }
            return
        } catch where error.code == .noSuchItem {
            // The first attempt of a replayed move reached the store before the process died.
            let replayed = attempt?.replay == true
            if let attempt, replayed {
                let adopted = try await adoptReplayedMove(record, to: path, name: name, parent: parent.identifier, fingerprint: fingerprint)
                try attempt.close()
                if adopted {
                    report.uploaded += 1
                    return
                }
            }
            // Either the item or its new folder is gone from the store. Only the first is
            // "moved here, deleted there"; a vanished destination is retried once sync down has
            // settled the folders (the local folder holding the item is uploaded again first).
            if try await storeStillHas(record.identifier) { throw error }
            // Moved here, deleted in the store.
            try store.deleteSubtree(domainID: domainID, path: record.path)
            if record.state == .placeholder || record.state == .symlink {
                try await executor.run { [replica] in try replica.removePlaceholder(path) }
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

    /// Finishes a replayed move whose first attempt reached the store before the process died:
    /// the item is gone from its old place and at its new one (a folder by kind, a file with
    /// the same content version), so it is recorded there. Returns false when the store does not
    /// look like that.
    private func adoptReplayedMove(
        _ record: ItemRecord, to path: String, name: String, parent: ItemIdentifier, fingerprint: FileFingerprint?
    )
        async throws(FileProviderError) -> Bool
    {
        guard try await !storeStillHas(record.identifier),
            let moved = try await backend.enumerateAllItems(in: parent).first(where: { $0.filename == name && $0.kind == record.kind }),
            record.kind == .folder || moved.version.content == record.contentVersion
        else { return false }
        try await recordMove(record, to: path, now: moved, parent: parent, fingerprint: fingerprint)
        return true
    }

    /// Records a move the store made: a folder's records are re-keyed, a file's record takes
    /// its new place (and its placeholder the new identifier).
    private func recordMove(_ record: ItemRecord, to path: String, now item: Item, parent: ItemIdentifier, fingerprint: FileFingerprint?)
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
        if moved.state == .placeholder || moved.state == .symlink {
            let metadata = PlaceholderMetadata(domain: domain.name, record: moved)
            try await executor.run { [replica] in try replica.writePlaceholder(path, metadata) }
        }
        try store.apply(domainID: domainID, upserts: [moved], deletions: record.identifier == moved.identifier ? [] : [record.identifier])
    }

    /// Makes the next sync down list the whole store: what the database just forgot (or marked
    /// gone) comes back, or goes, with a listing, and a change feed would not name it.
    private func relistNextSync() throws(FileProviderError) {
        try store.setSyncAnchor(nil, domainID: domainID, container: .workingSet)
    }

    /// Whether the store still has an item (`false` only for `noSuchItem`).
    private func storeStillHas(_ identifier: ItemIdentifier) async throws(FileProviderError) -> Bool {
        do {
            _ = try await backend.item(for: identifier)
            return true
        } catch where error.code == .noSuchItem {
            return false
        }
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
        if !byRelative.isEmpty { try relistNextSync() }
        for (relative, record) in byRelative {
            var gone = record
            gone.path = newPath + "/" + relative
            gone.identifier = ItemIdentifier("fileprovider-gone:" + UUID().uuidString)
            upserts.append(gone)
        }
        // Placeholders below carry their item's identifier: rewrite them, or a placeholder moved
        // later would not be recognised as its item (and the item would look deleted here).
        let rewritten = upserts.filter { $0.state == .placeholder || $0.state == .symlink }
            .map { ($0.path, PlaceholderMetadata(domain: domain.name, record: $0)) }
        if !rewritten.isEmpty {
            try await executor.run { [replica] in
                for (path, metadata) in rewritten where replica.placeholderExists(path) {
                    try replica.writePlaceholder(path, metadata)
                }
            }
        }
        try store.replaceSubtree(domainID: domainID, path: oldPath, with: upserts)
        // Placeholders below the folder carry the old identifiers: the scan knows a moved
        // placeholder by its identifier, so each is rewritten (where it still is). A crash
        // before this leaves old identifiers, as before the move was recorded.
        let placeholders = upserts.filter { $0.state == .placeholder || $0.state == .symlink }
        if placeholders.isEmpty { return }
        let name = domain.name
        try await executor.run { [replica] in
            for record in placeholders where replica.placeholderExists(record.path) {
                try? replica.writePlaceholder(record.path, PlaceholderMetadata(domain: name, record: record))
            }
        }
    }

    // MARK: Deletions

    private func uploadDeletion(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        // The scan saw it gone, but another process may have been replacing it meanwhile (a
        // download renamed into place while its placeholder went, an eviction): a listing taken
        // in the middle sees neither. Only what is still gone now is deleted in the store.
        if try await executor.run({ [self] in isInReplica(record) }) { return }
        if record.kind == .folder {
            try await uploadFolderDeletion(record, report: &report)
            return
        }
        do {
            try await journalled(.delete(record), handled: [.noSuchItem, .versionOutOfDate]) { step in
                // Based on the version the file was downloaded as (see `uploadEdit`): a newer one
                // that sync down recorded but did not download is a change its user never saw.
                if record.storeChangedSinceDownload { throw FileProviderError.versionOutOfDate(record.identifier) }
                try await step.send {
                    try await backend.deleteItem(identifier: record.identifier, baseVersion: record.version, options: [])
                }
            }
        } catch where error.code == .noSuchItem {
            // Already gone from the store.
        } catch where error.code == .versionOutOfDate {
            // Deleted here, edited in the store: the store's version comes back as a placeholder.
            let current = try await backend.item(for: record.identifier)
            var restored = record
            restored.update(from: current, path: record.path)
            restored.markPlaceholder()
            let metadata = PlaceholderMetadata(domain: domain.name, record: restored)
            try await executor.run { [replica] in try replica.writePlaceholder(record.path, metadata) }
            try store.save(restored)
            try store.recordConflict(
                ConflictRecord(
                    domainID: domainID, path: record.path, keptPath: nil, kind: "deletedAndEdited",
                    details: "deleted here and edited in the store; the store's version came back"))
            report.conflicts += 1
            return
        }
        try store.deleteSubtree(domainID: domainID, path: record.path)
        report.uploaded += 1
    }

    /// Whether the replica holds the item at its path: a folder, a file, or the item's own
    /// placeholder. Blocking.
    private func isInReplica(_ record: ItemRecord) -> Bool {
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
    private func uploadFolderDeletion(_ record: ItemRecord, report: inout SyncReport) async throws(FileProviderError) {
        func depth(_ path: String) -> Int { path.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: "/") ? 1 : 0) } }
        // What was in dataless folders was never in the replica: its user did not see it.
        let all = try store.descendants(domainID: domainID, of: record.path)
        let dataless = Set((all + [record]).filter(\.isDataless).map(\.path))
        let below = dataless.isEmpty ? all : all.filter { !dataless.contains(Self.split($0.path).parent) }
        let ordered = (below + [record]).enumerated().sorted { a, b in
            let (da, db) = (depth(a.element.path), depth(b.element.path))
            return da != db ? da > db : a.offset < b.offset
        }.map(\.element)
        var kept: [String] = []
        for item in ordered {
            do {
                try await journalled(.delete(item), handled: [.noSuchItem, .versionOutOfDate, .directoryNotEmpty]) { step in
                    // A file the store changed since it was downloaded stays (see `uploadDeletion`).
                    if item.storeChangedSinceDownload { throw FileProviderError.versionOutOfDate(item.identifier) }
                    try await step.send {
                        try await backend.deleteItem(
                            identifier: item.identifier, baseVersion: item.kind == .folder ? nil : item.version, options: [])
                    }
                }
            } catch where error.code == .noSuchItem {
                // Already gone from the store.
            } catch where error.code == .versionOutOfDate || error.code == .directoryNotEmpty {
                kept.append(item.path)
            }
        }
        // Forget the subtree: what the store kept comes back as new items with this sync's listing.
        try store.deleteSubtree(domainID: domainID, path: record.path)
        if !kept.isEmpty {
            try relistNextSync()
            try store.recordConflict(
                ConflictRecord(
                    domainID: domainID, path: record.path, keptPath: nil, kind: "deletedAndEdited",
                    details: "deleted here while the store had changes or new items in it; those came back"))
            report.conflicts += 1
            report.notices.append("\(display(record.path)): deleted here, but the store had changes in it; they came back")
        }
        report.uploaded += 1
    }
}
