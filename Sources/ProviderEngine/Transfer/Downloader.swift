import Foundation
import ProviderCore
import ProviderStore

/// Downloads a domain's files into its replica (`startProvidingItem`): each into a staging file
/// on the replica's file system, checked for size, dated, noted as the engine's download
/// (``DownloadNotes``), renamed into place over its placeholder, and recorded in batches.
/// Requests for the same item share one download; large downloads leave a checkpoint and
/// resume; a file that does not fit beside the reserve is refused before a byte is fetched
/// (``SpaceReservations``).
///
/// `materialize`, sync's due downloads, conflict resolution and (later) the on-access handler
/// all download through it. Safe to use from many tasks at once.
final class Downloader: Sendable {
    /// The domain, its store, its replica, the database, the executor.
    let context: DomainContext
    var domainID: Int64 { context.domainID }
    var domainName: String { context.domain.name }
    var backend: any Backend { context.backend }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    /// How many downloads run at once in a batch.
    let depth: Int
    /// The free space downloads check and promise (shared with the manager's other domains).
    let space: SpaceReservations
    /// Downloads under way (and finished ones until their batch is recorded), by item.
    let downloads = Mutex<[ItemIdentifier: SharedDownload]>([:])
    /// Fills of dataless files under way (``fillInPlace(_:)``), by item, with how far each has
    /// written its file.
    let fills = Mutex<[ItemIdentifier: (task: Task<ItemRecord, any Error>, watermark: FillWatermark)]>([:])
    /// How many callers of ``fillInPlace(_:)`` joined a fill already running (diagnostics and
    /// tests).
    let joinedFills = Mutex(0)

    init(context: DomainContext, depth: Int, space: SpaceReservations) {
        self.context = context
        self.depth = depth
        self.space = space
    }

    /// `DOMAIN:/path` of a relative path, exactly: for outcomes, JSON and keys.
    func location(_ path: String) -> String { "\(domainName):/\(path)" }

    /// `DOMAIN:/path` of a relative path for messages and logs (``TerminalText/quoted(_:)``).
    func display(_ path: String) -> String { TerminalText.quoted(location(path)) }

    /// Downloads files that are not materialized or are outdated, `downloadDepth` at a time, and
    /// records them in batches. Once the task is cancelled no download starts: each file not
    /// started gets a `cancelled` outcome (see ``FileProviderError/notStarted``).
    ///
    /// `placeholderFree` names files (relative paths) the caller knows have no `.placeholder`
    /// file beside them until they are placed: it read their folders while holding the
    /// domain's sync lock, which it keeps until the downloads are placed. Such a small file
    /// skips removing its placeholder; every other download removes it.
    public func download(_ records: [ItemRecord], events: EventHandler?, placeholderFree: Set<String> = []) async -> [ItemOutcome] {
        let replica = self.replica
        // A file recorded as materialized but missing (an evict interrupted after the file went)
        // is downloaded again.
        var seen = Set<ItemIdentifier>()
        let unique = records.filter { seen.insert($0.identifier).inserted }
        let pending =
            (try? await executor.run {
                unique.filter { $0.state != .materialized || $0.isOutdated || replica.fingerprint(atPath: replica.path($0.path)) == nil }
            }) ?? unique
        if pending.isEmpty { return [] }
        // Sizes come from the store: added without overflow, whatever they are.
        let totalBytes = pending.reduce(Int64(0)) { total, record in
            let (sum, overflow) = total.addingReportingOverflow(max(0, record.size))
            return overflow ? .max : sum
        }
        let counters = Mutex((bytes: Int64(0), items: 0, resumed: Int64(0)))
        let (store, domainID) = (self.store, self.domainID)
        let checkpoints = (try? await executor.run { try store.checkpoints(domainID: domainID) }) ?? [:]
        let report: @Sendable (Int64, TransferStep) -> Void = { delta, step in
            let now = counters.withLock { value -> (Int64, Int, Int64) in
                // The positions come from the store: added without overflow, whatever they are.
                let (bytes, overflow) = value.bytes.addingReportingOverflow(delta)
                value.bytes = overflow ? .max : bytes
                switch step {
                case .transferred: break
                case .resumed: value.resumed = min(value.bytes, value.resumed + min(delta, .max - value.resumed))
                case .finished: value.items += 1
                }
                return (value.bytes, value.items, value.resumed)
            }
            events?(
                .transfer(
                    completedBytes: now.0, totalBytes: totalBytes, completedItems: now.1, totalItems: pending.count, resumedBytes: now.2))
        }
        // Each outcome with the position of its file in `pending` (flush failures last): they are
        // returned in that order, sorted by number, not by looking paths up per comparison.
        var outcomes: [(position: Int, outcome: ItemOutcome)] = []
        var positions = [ItemIdentifier: Int](minimumCapacity: pending.count)
        for (index, record) in pending.enumerated() { positions[record.identifier] = index }
        var finished: [ItemRecord] = []
        var failedFetches: [(ItemRecord, FileProviderError)] = []
        // Small files go in batches: one job on the executor stages a batch, the backend
        // fetches it in one call, one job places it. `depth` batches run at once.
        let batches = self.batches(of: pending, checkpoints: checkpoints)
        // The policies the placed files inherit, read once per folder for all the batches.
        let policies = InheritedPolicies(store: store, domainID: domainID)
        await withTaskGroup(of: [(ItemRecord, Result<ItemRecord, FileProviderError>)].self) { group in
            var iterator = batches.makeIterator()
            var running = 0
            func startNext() -> Bool {
                if Task.isCancelled {
                    while let batch = iterator.next() {
                        for record in batch {
                            outcomes.append(
                                (
                                    positions[record.identifier] ?? .max,
                                    ItemOutcome(path: location(record.path), error: FileProviderError.notStarted)
                                ))
                        }
                    }
                    return false
                }
                guard let batch = iterator.next() else { return false }
                group.addTask { [self] in
                    if batch.count == 1, let record = batch.first {
                        do {
                            return [
                                (
                                    record,
                                    .success(
                                        try await self.downloadShared(record, checkpoint: checkpoints[record.identifier], report: report))
                                )
                            ]
                        } catch {
                            return [(record, .failure(FileProviderError.wrap(error)))]
                        }
                    }
                    return await self.downloadBatch(batch, report: report, placeholderFree: placeholderFree, policies: policies)
                }
                return true
            }
            while running < depth, startNext() { running += 1 }
            while let results = await group.next() {
                running -= 1
                for (record, result) in results {
                    switch result {
                    case .success(let updated):
                        finished.append(updated)
                        outcomes.append(
                            (
                                positions[record.identifier] ?? .max,
                                ItemOutcome(
                                    path: location(record.path), error: nil,
                                    notice: Self.versionNotice(record, updated, display(record.path)))
                            ))
                    case .failure(let error):
                        outcomes.append((positions[record.identifier] ?? .max, ItemOutcome(path: location(record.path), error: error)))
                        if ReplicaStatus.marksFailedFetch(error.code) { failedFetches.append((record, error)) }
                    }
                }
                if finished.count >= 500 {
                    if let error = await flush(&finished) { outcomes.append((.max, ItemOutcome(path: location(""), error: error))) }
                }
                if startNext() { running += 1 }
            }
        }
        if let error = await flush(&finished) { outcomes.append((.max, ItemOutcome(path: location(""), error: error))) }
        if !failedFetches.isEmpty { await recordFetchFailures(failedFetches) }
        // In the order the files were given, not the order the downloads ended: what a script
        // reads (`materialize --json`) is the same from run to run.
        return outcomes.enumerated().sorted { left, right in
            (left.element.position, left.offset) < (right.element.position, right.offset)
        }.map(\.element.outcome)
    }

    /// The notice of a download of another content version than the one the database had
    /// from the store's listing: the file changed meanwhile (once), or the store lists one
    /// version and sends another (at every sync, each time downloaded again); `nil` when the
    /// version is the one listed.
    static func versionNotice(_ requested: ItemRecord, _ downloaded: ItemRecord, _ shown: String) -> String? {
        guard !requested.contentVersion.isEmpty, downloaded.contentVersion != requested.contentVersion else { return nil }
        return
            "\(shown): the store sent another version than it listed (listed \(requested.contentVersion.hexString.prefix(16)), sent \(downloaded.contentVersion.hexString.prefix(16))); the one sent was kept. Once, the file changed meanwhile; at every sync, the store contradicts itself and the file is downloaded each time"
    }

    /// Records finished downloads in one job on the executor (run to its end); returns the
    /// database's failure, if any.
    private func flush(_ records: inout [ItemRecord]) async -> FileProviderError? {
        defer { records.removeAll(keepingCapacity: true) }
        do {
            let (store, domainID, upserts) = (store, domainID, records)
            try await executor.runToCompletion { try store.recordDownloads(domainID: domainID, records: upserts) }
        } catch {
            return error
        }
        // Now that the database says materialized, later requests need no shared task.
        let done = records.map(\.identifier)
        downloads.withLock { map in
            for identifier in done { map.removeValue(forKey: identifier) }
        }
        return nil
    }

    /// Downloads one file; concurrent requests for the same item share one download.
    func downloadShared(_ record: ItemRecord, checkpoint: TransferCheckpoint?, report: @escaping @Sendable (Int64, TransferStep) -> Void)
        async throws -> ItemRecord
    {
        // A download that finished stays in `downloads` until its batch is recorded, so no request
        // can fall between the two and download the item again.
        var shared = downloads.withLock { $0[record.identifier] }
        if shared == nil {
            let replica = self.replica
            let store = self.store
            let domainID = self.domainID
            let current = try await executor.run { () throws -> ItemRecord? in
                guard let current = try store.item(domainID: domainID, identifier: record.identifier), current.state == .materialized,
                    !current.isOutdated, replica.fingerprint(atPath: replica.path(current.path)) != nil
                else { return nil }
                return current
            }
            if let current { return current }
            shared = downloads.withLock { map -> SharedDownload in
                if let running = map[record.identifier] { return running }
                let identifier = record.identifier
                let task = Task { [self] () async -> [Result<ItemRecord, FileProviderError>] in
                    do throws(FileProviderError) {
                        do throws(FileProviderError) {
                            return [.success(try await self.performDownload(record, checkpoint: checkpoint, report: report))]
                        } catch  where HashMismatch.isMismatch(error) {
                            // Bytes that are not the store's are never placed: fetched once more.
                            self.context.logger.warning("\(error.message); fetching it once more")
                            do throws(FileProviderError) {
                                return [.success(try await self.performDownload(record, checkpoint: nil, report: report))]
                            } catch  where HashMismatch.isMismatch(error) {
                                await self.recordMismatch(error, of: record)
                                throw error
                            }
                        }
                    } catch {
                        _ = self.downloads.withLock { $0.removeValue(forKey: identifier) }
                        return [.failure(error)]
                    }
                }
                let running = SharedDownload(task: task, index: 0)
                map[identifier] = running
                return running
            }
        }
        guard let shared else { throw FileProviderError(.localIOFailure, "no download task") }
        return try await shared.value()
    }

    /// A download under way that others may wait for: one file of a batch's task (a single
    /// download is a batch of one).
    struct SharedDownload: Sendable {
        let task: Task<[Result<ItemRecord, FileProviderError>], Never>
        let index: Int

        /// The downloaded item's record; the task is cancelled when the waiting task is.
        /// - Throws: the download's error.
        func value() async throws(FileProviderError) -> ItemRecord {
            let task = self.task
            let results = await withTaskCancellationHandler {
                await task.value
            } onCancel: {
                task.cancel()
            }
            guard index < results.count else { throw FileProviderError(.localIOFailure, "no outcome for a shared download") }
            return try results[index].get()
        }
    }

    /// What a progress report of a download counts: bytes moved now, bytes already on disk
    /// from an interrupted download (resumed), or a file done.
    enum TransferStep: Sendable {
        case transferred, resumed, finished
    }

    /// Files at least this large get a checkpoint before their download starts.
    static let checkpointThreshold: Int64 = 4 << 20

    /// The name of an item's staging file.
    static func stagingName(for identifier: ItemIdentifier) -> String {
        String(FNV1a.hash(identifier.rawValue.utf8), radix: 16) + ".part"
    }

    private func performDownload(
        _ record: ItemRecord, checkpoint: TransferCheckpoint?, report: @escaping @Sendable (Int64, TransferStep) -> Void
    )
        async throws(FileProviderError) -> ItemRecord
    {
        let replica = self.replica
        let staging = replica.stagingPath(named: Self.stagingName(for: record.identifier))
        var offset: Int64 = 0
        if let checkpoint, checkpoint.contentVersion == record.contentVersion, backend.capabilities.supportsRangedReads {
            // Recorded before staging files went into 16 folders: the file moves over, so the
            // download still resumes and nothing stays behind at the old place.
            // Moved (when it must) and measured in one job on the executor.
            offset =
                (try? await executor.run { () -> Int64 in
                    if checkpoint.stagingPath != staging { try? replica.moveStagingFile(from: checkpoint.stagingPath, to: staging) }
                    return replica.fileSize(atPath: staging) ?? 0
                }) ?? 0
        }
        let resumeFrom = offset
        // A file that does not fit beside the running downloads and the reserve is refused
        // before a byte is fetched; its space is promised until the download ends.
        let space = self.space
        let canResume = resumeFrom > 0
        let ticket: SpaceReservations.Ticket
        do {
            ticket = try await executor.run { () throws(FileProviderError) in
                try space.reserve(size: record.size, stagingFile: staging, folder: replica.staging.path, canResume: canResume)
            }
        } catch {
            if checkpoint != nil {
                let (store, domainID) = (store, domainID)
                _ = try? await executor.runToCompletion {
                    if replica.fileSize(atPath: staging) == nil {
                        try store.removeCheckpoint(domainID: domainID, identifier: record.identifier)
                    }
                }
            }
            throw error
        }
        defer { space.release(ticket) }
        // Large downloads leave a checkpoint first, so even a killed process resumes.
        if checkpoint == nil, backend.capabilities.supportsRangedReads, record.size >= Self.checkpointThreshold {
            let (store, checkpoint) = (
                store,
                TransferCheckpoint(
                    domainID: domainID, identifier: record.identifier.rawValue, contentVersion: record.contentVersion,
                    stagingPath: staging, bytesTransferred: 0, totalBytes: record.size)
            )
            try await executor.run { try store.saveCheckpoint(checkpoint) }
        }
        try await executor.run { try replica.prepareStagingFile(atPath: staging, truncate: resumeFrom == 0) }
        // Backends report positions in the file, the resumed part included: that part is
        // reported once as resumed (done, but not moved now: no speed), then only what is new.
        if offset > 0 { report(offset, .resumed) }
        let progressBase = Mutex(offset)
        // Hashed as the backend writes it; not a resumed download (its first bytes were
        // written by an earlier run, and reading them again is what hashing as it streams avoids).
        let destination = URL(fileURLWithPath: staging, isDirectory: false)
        let sink = offset == 0 ? FastSHA256.sink() : nil
        let backend = self.backend
        let item: Item
        do {
            // A resumed download asks for the version its first bytes are of: the rest of
            // another version after them would be a file the store never had.
            item = try await ContentSink.feeding(sink.map { [destination: $0] } ?? [:]) { () async throws(FileProviderError) -> Item in
                try await backend.fetchContents(
                    for: record.identifier, version: offset > 0 ? record.version : nil, to: destination,
                    offset: offset,
                    progress: { completed, _ in
                        let delta = progressBase.withLock { last -> Int64 in
                            guard completed > last else { return 0 }
                            defer { last = completed }
                            return completed - last
                        }
                        if delta > 0 { report(delta, .transferred) }
                    })
            }
        } catch {
            // Its hashing thread ends now, not when the sink goes.
            sink?.cancel()
            // Run even when the task was cancelled: the partial file gets its checkpoint or goes.
            let failure = try? await executor.runToCompletion { [self] in failed(record, error, staging: staging, ticket: ticket) }
            throw failure ?? error
        }
        // Complete: nothing more to promise (once renamed, its staging path would count again).
        space.release(ticket)
        // Placing a finished download takes a moment and is never cut short: the staging file
        // would stay behind without a checkpoint.
        let sha256 = await sink?.finish(size: item.size)
        let updated = try await executor.runToCompletion { [self] () throws(FileProviderError) -> ItemRecord in
            try place(record, item, staging: staging, sha256: sha256)
        }
        if checkpoint != nil || resumeFrom > 0 || record.size >= Self.checkpointThreshold {
            let (store, domainID) = (self.store, self.domainID)
            _ = try? await executor.runEvenIfCancelled { try store.removeCheckpoint(domainID: domainID, identifier: record.identifier) }
        }
        report(0, .finished)
        return updated
    }

    /// What follows a failed fetch into `staging`: on a full disk the partial file gives its
    /// space back unless the reserve stays free; a partial file stays with a checkpoint where
    /// the store can resume it (not when its version is no longer there), else it is removed. Returns the error to report. Blocking.
    func failed(_ record: ItemRecord, _ error: FileProviderError, staging: String, ticket: SpaceReservations.Ticket) -> FileProviderError {
        let ranged = backend.capabilities.supportsRangedReads
        let full = space.outOfSpace(
            error, size: record.size, stagingFile: staging, folder: replica.staging.path, ticket: ticket, canResume: ranged)
        if full?.keptPartial == false { try? store.removeCheckpoint(domainID: domainID, identifier: record.identifier) }
        let done = replica.fileSize(atPath: staging) ?? 0
        if error.code == .versionNoLongerAvailable {
            // Its bytes are of a version the store no longer has: nothing to resume.
            try? store.removeCheckpoint(domainID: domainID, identifier: record.identifier)
            try? replica.removeFile(atPath: staging)
        } else if done > 0 && ranged {
            try? store.saveCheckpoint(
                TransferCheckpoint(
                    domainID: domainID, identifier: record.identifier.rawValue, contentVersion: record.contentVersion,
                    stagingPath: staging, bytesTransferred: done, totalBytes: record.size))
        } else {
            try? replica.removeFile(atPath: staging)
        }
        return full?.error ?? error
    }

    /// Records on the item a download that did not match the store's hash twice, for `why`
    /// (the item's last error) and the log.
    func recordMismatch(_ error: FileProviderError, of record: ItemRecord) async {
        context.logger.error("\(error.message) (twice)")
        let (store, domainID, identifier) = (self.store, self.domainID, record.identifier)
        _ = try? await executor.runToCompletion { () throws(FileProviderError) in
            guard var current = try store.item(domainID: domainID, identifier: identifier) else { return }
            current.lastError = error.message
            try store.apply(domainID: domainID, upserts: [current], deletions: [])
        }
    }

    /// Records downloads that failed on the store's side or the disk's
    /// (``ReplicaStatus/marksFailedFetch(_:)``): each item's last error (`why` says why) and
    /// ``ReplicaStatus/error`` on the file that stands for it. Run to its end; what cannot be
    /// written is left as it was.
    func recordFetchFailures(_ failures: [(ItemRecord, FileProviderError)]) async {
        let (store, domainID, replica, domain) = (self.store, self.domainID, self.replica, self.domainName)
        _ = try? await executor.runToCompletion { () throws(FileProviderError) in
            var records: [ItemRecord] = []
            for (record, error) in failures {
                guard var current = try store.item(domainID: domainID, identifier: record.identifier) else { continue }
                // Downloaded meanwhile (another request's download of it worked): nothing to say.
                guard current.state != .materialized || current.isOutdated else { continue }
                current.lastError = "download failed: \(error.message)"
                records.append(current)
                ReplicaStatus.markFetchFailed(current.path, in: replica, domain: domain)
            }
            if !records.isEmpty { try store.apply(domainID: domainID, upserts: records, deletions: []) }
        }
    }

    /// Checks a complete download against the content hash the store sent with it (an
    /// algorithm the engine computes: ``ContentHash/isCheckable``) and returns the download's
    /// SHA-256 (lowercase hex): `streamed`, computed as the backend wrote the bytes, else the one
    /// computed here to check a `sha256` store hash, else `nil`. A `sha256` store hash is
    /// checked against `streamed` without reading the file again. Blocking.
    /// - Throws: `corruptData` naming both hashes when the bytes are not the ones hashed
    ///   (``HashMismatch``); `localIOFailure` when the staging file cannot be read.
    @discardableResult
    func checkHash(of item: Item, staged: String, path: String, streamed: String? = nil) throws(FileProviderError) -> String? {
        guard let text = item.contentHash, let hash = ContentHash(text), hash.isCheckable else { return streamed }
        let found: String?
        if hash.algorithm == "sha256", let streamed {
            found = streamed
        } else if hash.algorithm == "sha256" {
            found = try FastSHA256.ofFile(staged)
        } else {
            found = try hash.ofFile(staged)
        }
        guard let found, found != hash.hex else { return hash.algorithm == "sha256" ? found : streamed }
        throw HashMismatch.error(path: display(path), algorithm: hash.algorithm, found: found, expected: hash.hex)
    }
}
