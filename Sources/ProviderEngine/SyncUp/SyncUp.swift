import Foundation
import ProviderCore
import ProviderStore

/// Sync up of one domain: finds the local changes in the replica (``LocalScanner``, folder by
/// folder against the database, on the executor), tidies what the scan found unrecorded, puts
/// the changes in order and sends them through the ``Uploader``: new files and edits several at
/// once with their journal entries in batches, new folders, moves and deletions one by one.
///
/// Owned by the domain's ``DomainController``, whose `sync` calls ``push(report:settleSeconds:changes:populate:)``
/// while it holds the domain's sync lock and tree lock. Safe to use from many tasks at once; one
/// push runs at a time per domain (the locks).
final class SyncUp: Sendable {
    let context: DomainContext
    let uploader: Uploader
    let journal: OperationJournal
    let moves: MoveRecorder
    /// Names never uploaded from this domain's replica.
    let ignoreRules: IgnoreRules
    /// Files a watcher saw finished being written: uploaded without waiting for the settle time.
    let finishedWrites = FinishedWrites()
    /// Called after the local scan reads each folder, with its path (tests change the replica
    /// in the middle of a scan).
    let folderScanned = Mutex<(@Sendable (String) -> Void)?>(nil)
    /// The most changes of each kind one scan holds (``ScanFindings/defaultLimit``; tests set
    /// fewer). A replica with more is sent in several passes.
    let scanLimit = Mutex(ScanFindings.defaultLimit)

    init(context: DomainContext, downloader: Downloader, ignoreRules: IgnoreRules) {
        self.context = context
        journal = OperationJournal(context: context)
        moves = MoveRecorder(context: context)
        uploader = Uploader(
            context: context, journal: journal, conflicts: ConflictResolver(context: context, downloader: downloader), moves: moves)
        self.ignoreRules = ignoreRules
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
    ///   fails. What `populate` throws.
    ///
    /// With `changes` (a watcher's record of the folders that changed), only those folders are
    /// compared (``ScanScope``); when this push sent something or did not finish (it throws, a
    /// change fails or conflicts, a file is still being written), the folders are given back
    /// for the next sync to compare again.
    ///
    /// `populate` populates a dataless folder (and the dataless folders above it) in which the
    /// scan found new local items; the caller holds the domain's tree lock, as a population needs.
    func push(
        report: inout SyncReport, settleSeconds: Double, changes: ChangedFolders? = nil,
        populate: (String) async throws(FileProviderError) -> Void
    ) async throws(FileProviderError) {
        let started = Date()
        defer { report.phases.upload += Date().timeIntervalSince(started) }
        // Before the scope is taken: a change after this may be in no folder of the scope.
        var scopeTaken = LocalScanner.coarseClockNanos()
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
        try await compareAndSend(
            report: &report, settleSeconds: settleSeconds, scope: &scope, scopeTaken: &scopeTaken, changes: changes,
            populate: populate)
        finished = true
    }

    /// The passes of ``push(report:settleSeconds:changes:populate:)`` over `scope`, which becomes
    /// ``ScanScope/all`` once a folder move re-keyed items.
    /// - Throws: what ``push(report:settleSeconds:changes:populate:)`` throws.
    private func compareAndSend(
        report: inout SyncReport, settleSeconds: Double, scope: inout ScanScope, scopeTaken: inout Int64,
        changes: ChangedFolders?, populate: (String) async throws(FileProviderError) -> Void
    ) async throws(FileProviderError) {
        let replica = context.replica
        _ = try? await context.executor.run { replica.removeComparisonCopies() }
        // Old identifiers of items a folder move re-keyed in an earlier pass, to their new ones: a
        // placeholder the user moved before the folder move was sent still carries the old one.
        var renamed: [String: String] = [:]
        // Those of a move an earlier replay recorded.
        moves.noteRenamedIdentifiers(into: &renamed)
        var changingScans = 0
        // Passes: a folder move ends a pass (see below); what is left waits for the next sync.
        // A partial scan (more changes than one scan holds) is followed by another as long as
        // each sends something; those passes are not counted.
        var passes = 0
        var partialPasses = 0
        while passes < 8 {
            passes += 1
            let passNotices = report.notices.count
            let settleNanos = Int64(settleSeconds * 1e9)
            let finished = settleNanos > 0 ? finishedWrites.current(maximumAge: settleSeconds) : [:]
            var scanner = LocalScanner(
                replica: replica, domain: context.domain.name, ignore: ignoreRules, settleNanos: settleNanos, renamedIdentifiers: renamed,
                finishedWrites: finished)
            scanner.folderRead = folderScanned.withLock { $0 }
            scanner.findingsLimit = scanLimit.withLock { $0 }
            scanner.comparesFlags = context.backend.capabilities.supportsFileSystemFlags
            // Folder by folder against the database, on the executor (files and SQLite block).
            let records = StoreScanRecords(store: context.store, domainID: context.domainID)
            // A watcher's scope: changes since it was taken count as changes during the scan.
            let (passScope, since) = (scope, changes == nil ? nil : scopeTaken)
            var result = try await context.executor.run { [scanner] in
                try scanner.scan(records, scope: passScope, changesSince: since)
            }
            report.localFoldersCompared += result.foldersRead
            if passScope.everything { report.comparedWholeReplica = true }
            if result.replicaChangedDuringScan {
                // What looks deleted may have moved into a folder read earlier: scan again once
                // the replica holds still; if it never does, deletions wait for the next sync.
                if changingScans < Self.scansOfAChangingReplica.count {
                    try? await Task.sleep(for: Self.scansOfAChangingReplica[changingScans])
                    changingScans += 1
                    // Where it moved to changed meanwhile: the watcher has seen it.
                    if let changes {
                        scopeTaken = LocalScanner.coarseClockNanos()
                        scope.formUnion(await changes.take())
                    }
                    continue
                }
                let waiting = result.changes.filter(\.isDeletion).count + result.strayPlaceholders.count
                result.changes.removeAll(where: \.isDeletion)
                result.strayPlaceholders = []
                let reason =
                    "the replica changed during each of \(changingScans + 1) comparisons: \(waiting) deletion\(waiting == 1 ? "" : "s") wait for the next sync"
                // Not counted as changes not sent: what looked deleted may only have moved, or
                // been swapped by a download or an eviction of this replica; it is a notice.
                report.notices.append("\(context.domain.name): \(reason)")
            }
            if !result.occupiedDataless.isEmpty {
                // Made in folders that were not populated yet: populate them, then compare.
                for path in result.occupiedDataless { try await populate(path) }
                continue
            }
            report.pendingLocal = result.unsettled
            await markUnsent(result)
            try await tidy(result)
            try await ExcludedFromSync.takeOut(from: &result, scope: scope, context: context, report: &report)
            let undone = try await withoutServerSideMoves(&result.changes, report: &report)
            let madeProgress =
                !result.changes.isEmpty || !result.strayPlaceholders.isEmpty || !result.evicted.isEmpty || !result.placed.isEmpty
                || undone > 0
            if result.isPartial && !madeProgress {
                let reason =
                    "more local changes than one comparison holds, and none of those it held could be sent alone; the rest waits for the next sync"
                report.notSend("", reason, notice: "\(context.domain.name): \(reason)")
                break
            }
            if result.isPartial && result.changes.isEmpty && partialPasses < Self.partialPassLimit {
                partialPasses += 1
                passes -= 1
                continue
            }
            if result.changes.isEmpty {
                // Nothing left to send: an unfinished entry can no longer be replayed.
                if result.unsettled.isEmpty && scope.everything { try await journal.closeStaleEntries() }
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
                    throw FileProviderError.notStarted
                }
                // New files and edits do not depend on each other: several go at once.
                var end = index
                while end < ordered.endIndex && Self.isIndependent(ordered[end]) { end += 1 }
                if end > index {
                    do {
                        try await sendTogether(Self.spreadOverFolders(ordered[index..<end]), report: &report)
                    } catch  where error.code == .cancelled {
                        report.unsent += ordered.endIndex - end
                        throw error
                    }
                    index = end
                    continue
                }
                let change = ordered[index]
                index += 1
                do {
                    if case .moved(let record, _, _) = change, record.kind == .folder {
                        if try await send(change, report: &report) {
                            changedFolderTree = true
                            moves.noteRenamedIdentifiers(into: &renamed)
                        }
                    } else {
                        try await send(change, report: &report)
                    }
                } catch  where error.code == .cancelled {
                    report.unsent += ordered.endIndex - index + 1
                    throw error
                }
            }
            await journal.prune()
            if result.isPartial {
                // The rest of what the scan could not hold: the next scan finds it, unless
                // something failed in this pass (it would be found and fail again).
                if report.notices.count > passNotices || partialPasses >= Self.partialPassLimit { break }
                partialPasses += 1
                if !changedFolderTree { passes -= 1 }
                if changedFolderTree { scope = .all }
                continue
            }
            // A moved folder re-keys everything below it: scan again for edits made inside it.
            if changedFolderTree {
                scope = .all
                continue
            }
            if !movedAndEdited { break }
        }
    }

    /// For a store that cannot move items (``BackendCapabilities/supportsServerSideMove``):
    /// rewrites `changes` without moves and moves back what cannot be sent otherwise
    /// (``MovesWithoutServerSupport``), each with a notice.
    /// - Returns: how many moves were undone.
    /// - Throws: `cancelled` when the task was cancelled before the executor ran.
    private func withoutServerSideMoves(_ changes: inout [LocalChange], report: inout SyncReport) async throws(FileProviderError)
        -> Int
    {
        guard !context.backend.capabilities.supportsServerSideMove else { return 0 }
        let (send, undo) = MovesWithoutServerSupport.rewrite(changes)
        changes = send
        if undo.isEmpty { return 0 }
        let context = self.context
        let fallback = MovesWithoutServerSupport(replica: context.replica, display: { context.display($0) })
        report.notices += try await context.executor.run { undo.map { fallback.moveBack($0.record, from: $0.from) } }
        return undo.count
    }

    /// The most partial passes (scans that found more than they hold) one push makes: at
    /// ``ScanFindings/defaultLimit`` each, 20 million changes.
    static let partialPassLimit = 1_000

    /// How long push lets the replica hold still before each new scan, when the last one saw
    /// folders change while it would delete something.
    static let scansOfAChangingReplica: [Duration] = [.milliseconds(10), .milliseconds(50), .milliseconds(250)]

    /// Records evictions and downloads the scan found unrecorded and removes placeholders no
    /// item owns.
    /// - Throws: `localIOFailure` when the replica or the database cannot be written;
    ///   `cancelled` when the task was cancelled before a step on the executor.
    private func tidy(_ result: LocalScanResult) async throws(FileProviderError) {
        if !result.placed.isEmpty {
            // A download placed but not recorded may still have its placeholder beside it (its
            // process died before removing it): the item's file is there, so it goes.
            let replica = context.replica
            let leftovers = result.placed.filter { $0.record.state == .placeholder }.map(\.record)
            try await context.executor.run {
                for record in leftovers where replica.isPlaceholder(of: record.identifier, at: record.path) {
                    try replica.removePlaceholder(record.path)
                }
            }
            let (store, domainID) = (context.store, context.domainID)
            try await context.executor.run { try store.recordPlacedDownloads(domainID: domainID, result.placed.map(\.download)) }
        }
        if !result.evicted.isEmpty {
            let (store, domainID) = (context.store, context.domainID)
            let upserts = result.evicted.map { record in
                var record = record
                record.markPlaceholder()
                return record
            }
            try await context.executor.run { try store.apply(domainID: domainID, upserts: upserts, deletions: []) }
        }
        if !result.strayPlaceholders.isEmpty {
            let replica = context.replica
            try await context.executor.run {
                for path in result.strayPlaceholders { try replica.removePlaceholder(path) }
            }
        }
    }

    /// How many new files and edits go to the store at once, unless the backend runs more
    /// transfers at once (``BackendCapabilities/concurrentTransfers``).
    static let uploadDepth = 4

    /// Whether a change can go beside others of its kind: a new file or an edit (new folders,
    /// moves and deletions change the tree others rely on and go one by one).
    static func isIndependent(_ change: LocalChange) -> Bool {
        switch change {
        case .created(_, let kind, _): return kind != .folder
        case .modified, .flagsChanged: return true
        case .writtenOverPlaceholder, .moved, .deleted: return false
        }
    }

    /// Sends one change. A failure that backs the whole domain off, and a cancellation, are
    /// thrown; a refusal that says the store cannot take the item as it is (`notSupported`,
    /// `invalidFilename` for a new item or an edit) excludes it from sync
    /// (``ExcludedFromSync/refusal(of:_:domainID:layout:)``); any other is noted on the item, and
    /// the next sync tries again. Returns whether it worked.
    /// - Throws: an error whose code's reaction is `backOffDomain` (`serverUnreachable`,
    ///   `notAuthenticated`, `insufficientQuota`, …), or `cancelled`.
    @discardableResult
    private func send(_ change: LocalChange, report: inout SyncReport) async throws(FileProviderError) -> Bool {
        do {
            let sent = report.uploaded
            try await uploader.upload(change, report: &report)
            if report.uploaded > sent { context.logTransfer(change.path, sentText(change)) }
            // A result its batch recorded gets its status when written (``SentStatus``).
            if JournalBatch.current?.takeRecorded(change.path) != true { await markSent(change) }
            return true
        } catch  where error.code.reaction == .backOffDomain || error.code == .cancelled {
            throw error
        } catch {
            let (store, domainID) = (context.store, context.domainID)
            if let refused = ExcludedFromSync.refusal(of: change, error, domainID: domainID, layout: context.replica.layout) {
                // Its refused operation is closed: nothing was done, and a change sends it afresh.
                var key = Self.journalKey(of: change)
                if case .writtenOverPlaceholder(let record, _) = change { key = .modify(record) }
                let template = key.template
                // One job on the executor (SQLite blocks).
                _ = try? await context.executor.runToCompletion {
                    // The store cannot take it as it is: told once, not sent again until it changes.
                    try? store.updateExcludedItems(domainID: domainID, saving: [refused], removing: [])
                    if var entry = try? store.unfinishedOperation(domainID: domainID, templateIdentifier: template) {
                        entry.state = .done
                        entry.lastError = "excluded from sync: \(error.message)"
                        try? store.updateJournal(entry)
                    }
                }
                report.notSend(
                    refused.path, "excluded from sync: \(refused.reason)",
                    notice: "\(context.display(refused.path)): excluded from sync: \(refused.reason)")
                return false
            }
            await noteNotSent(change.path, error, isDeletion: change.isDeletion, report: &report)
            return false
        }
    }

    /// Notes a change the store did not take (or whose result was not recorded): in `report`,
    /// on the item's record when it has one, and as the file's `error` status; the next sync
    /// tries again.
    private func noteNotSent(_ path: String, _ error: FileProviderError, isDeletion: Bool, report: inout SyncReport) async {
        report.notSend(path, "not uploaded: \(error.message)", notice: "\(context.display(path)): not uploaded: \(error.message)")
        let (store, domainID, replica, domain) = (context.store, context.domainID, context.replica, context.domain.name)
        _ = try? await context.executor.runToCompletion {
            if var record = try? store.item(domainID: domainID, path: path) {
                record.lastError = error.message
                try? store.save(record)
            }
            if !isDeletion { ReplicaStatus.error.writeIfFile(atPath: replica.path(path), domain: domain) }
        }
    }

    /// Writes `unsent` (``ReplicaStatus``) on the files a scan found changed or new, and on
    /// those still being written: every program sees that they are not in the store yet.
    private func markUnsent(_ result: LocalScanResult) async {
        var paths = result.unsettled
        for change in result.changes {
            switch change {
            case .created(_, .file, _), .modified, .writtenOverPlaceholder: paths.append(change.path)
            default: break
            }
        }
        guard !paths.isEmpty else { return }
        let (replica, domain, executor) = (context.replica, context.domain.name, context.executor)
        // Four attribute calls a new file, 10,000 new files before the first upload starts: in
        // parts on every thread of the executor, as the files are independent.
        let part = max(Self.unsentMarksPerJob, (paths.count + executor.threadCount - 1) / max(1, executor.threadCount))
        let parts = stride(from: 0, to: paths.count, by: part).map { Array(paths[$0..<min($0 + part, paths.count)]) }
        await withTaskGroup(of: Void.self) { group in
            for marked in parts {
                group.addTask { _ = try? await executor.run { UnsentStatus.write(on: marked, in: replica, domain: domain) } }
            }
        }
    }

    /// The fewest files ``markUnsent(_:)`` gives one job of the executor.
    static let unsentMarksPerJob = 512

    /// Writes the in-sync status (`downloaded` or `pinned`) on a file whose change the store
    /// took, and on a folder made or moved here (``FolderStatus``, where the layout writes them).
    private func markSent(_ change: LocalChange) async {
        if change.isDeletion { return }
        let (store, domainID, replica, domain, path) = (context.store, context.domainID, context.replica, context.domain.name, change.path)
        _ = try? await context.executor.run {
            guard let record = try store.item(domainID: domainID, path: path) else { return }
            if record.kind == .folder {
                FolderStatus.write(record, in: replica, domain: domain, store: store, domainID: domainID)
                return
            }
            guard record.state == .materialized,
                ReplicaStatus.read(atPath: replica.path(path)) != .conflict
            else { return }
            ReplicaStatus.markDownloaded(record, in: replica, domain: domain, store: store, domainID: domainID)
        }
    }

    /// What a change sent to the store was, for its log line: `uploaded (new file)`,
    /// `moved in the store from photos:/old.jpg`.
    func sentText(_ change: LocalChange) -> String {
        switch change {
        case .created(_, .folder, _): return "created in the store (new folder)"
        case .created(_, .symlink, _): return "created in the store (new symlink)"
        case .created: return "uploaded (new file)"
        case .modified: return "uploaded (edited)"
        case .flagsChanged: return "sent its executable bit"
        case .writtenOverPlaceholder: return "uploaded (written over a file not downloaded)"
        case .moved(let record, _, _): return "moved in the store from \(context.display(record.path))"
        case .deleted(let record): return record.kind == .folder ? "deleted in the store, with what was in it" : "deleted in the store"
        }
    }

    /// Sends independent changes ``uploadDepth`` at a time, their journal entries opened and
    /// finished in batches (``JournalBatch``), the statuses of the files sent written with
    /// their results (``SentStatus``). The first failure that backs the domain off, or a
    /// cancellation of the task, stops what has not started (its journal entries are given
    /// back) and is thrown once the running ones ended; `report.unsent` counts the changes of
    /// this batch that were not sent then.
    /// - Throws: that failure (`cancelled` for a cancellation); else `localIOFailure` when the
    ///   journal could not be written.
    private func sendTogether(_ changes: [LocalChange], report: inout SyncReport) async throws(FileProviderError) {
        let statuses = SentStatus(context: context)
        let depth = TransferDepths.depth(Self.uploadDepth, for: context.backend.capabilities)
        // New files' results are written ``JournalBatch/creationsPerWrite`` at a time, or as
        // many as go to the store at once when more do.
        let batch = journal.makeBatch(gathered: max(depth, JournalBatch.creationsPerWrite), afterWrite: { statuses.write($0) })
        let domainID = context.domainID
        let (outcomes, notStarted, stopped) = await JournalBatch.$current.withValue(batch) {
            await withTaskGroup(of: (SyncReport, FileProviderError?).self) { group in
                var next = changes.startIndex
                var opened = changes.startIndex
                var running = 0
                var stop: FileProviderError?
                func startNext() async -> Bool {
                    if stop == nil && Task.isCancelled { stop = FileProviderError.notStarted }
                    guard stop == nil, next < changes.endIndex else { return false }
                    if next == opened {
                        opened = min(next + JournalBatch.size, changes.endIndex)
                        let part = changes[next..<opened]
                        do throws(FileProviderError) {
                            // The entries and the folders new files go into, in one job.
                            try await batch.open(
                                part.map { Self.journalKey(of: $0).entry(domainID: domainID) },
                                folders: Set(part.map { RelativePath($0.path).parent }), domainID: domainID)
                        } catch {
                            stop = error
                            return false
                        }
                    }
                    let change = changes[next]
                    next += 1
                    group.addTask { [self] in
                        var part = SyncReport(domain: context.domain.name)
                        do throws(FileProviderError) {
                            try await send(change, report: &part)
                            return (part, nil)
                        } catch {
                            return (part, error)
                        }
                    }
                    return true
                }
                while running < depth, await startNext() { running += 1 }
                var outcomes: [(SyncReport, FileProviderError?)] = []
                while let outcome = await group.next() {
                    running -= 1
                    outcomes.append(outcome)
                    if let error = outcome.1, stop == nil { stop = error }
                    if await startNext() { running += 1 }
                }
                return (outcomes, changes.endIndex - next, stop)
            }
        }
        var failure: FileProviderError?
        for (part, error) in outcomes {
            report.uploaded += part.uploaded
            report.conflicts += part.conflicts
            report.notices += part.notices
            report.addProblems(of: part)
            if error?.code == .cancelled { report.unsent += 1 }
            if failure == nil { failure = error }
        }
        report.unsent += notStarted
        failure = failure ?? stopped
        do {
            try await batch.close()
        } catch {
            failure = failure ?? error
        }
        // New files the store answered with another item's identifier: not recorded.
        for (path, error) in batch.refused() {
            report.uploaded -= 1
            await noteNotSent(path, error, isDeletion: false, report: &report)
        }
        if let failure { throw failure }
    }

    /// The journal key of a change ``isIndependent(_:)`` lets go beside others.
    private static func journalKey(of change: LocalChange) -> JournalKey {
        switch change {
        case .created(let path, let kind, _): return .create(path: path, kind: kind)
        case .modified(let record, _), .flagsChanged(let record, _): return .modify(record)
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
            let parent = RelativePath(change.path).parent
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
            case .modified, .flagsChanged, .writtenOverPlaceholder: return 3
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
}
