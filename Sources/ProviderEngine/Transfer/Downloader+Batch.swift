import Foundation
import ProviderCore
import ProviderStore

extension Downloader {
    /// Files smaller than this, without a checkpoint, are downloaded in batches.
    static let batchableSize: Int64 = 1 << 20
    /// The most files in one batch.
    static let batchFiles = 64
    /// The most bytes in one batch (by the sizes the store gave).
    static let batchBytes: Int64 = 8 << 20

    /// Splits downloads into batches: small files without a checkpoint together, up to
    /// ``batchFiles`` files and ``batchBytes`` bytes, and few enough per batch that `depth`
    /// batches run at once when there are that many files; every other file alone (it may
    /// resume, or it is large enough that its own transfer dominates).
    func batches(of records: [ItemRecord], checkpoints: [ItemIdentifier: TransferCheckpoint]) -> [[ItemRecord]] {
        let perBatch = max(1, min(Self.batchFiles, (records.count + depth - 1) / max(1, depth)))
        var batches: [[ItemRecord]] = []
        var current: [ItemRecord] = []
        var bytes: Int64 = 0
        for record in records {
            // Sizes come from the store: compared, never added past the limit.
            guard checkpoints[record.identifier] == nil, record.size >= 0, record.size < Self.batchableSize else {
                batches.append([record])
                continue
            }
            if current.count == perBatch || record.size > Self.batchBytes - bytes {
                batches.append(current)
                current = []
                bytes = 0
            }
            current.append(record)
            bytes += record.size
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }

    /// Downloads a batch of small files (none with a checkpoint): items another request is
    /// downloading already are waited for, the others share one task (``performBatch(_:report:placeholderFree:policies:)``)
    /// that later requests for them wait for. `policies`: the memo of inherited policies the
    /// caller's batches share (`nil`: one for this batch). Returns each file's outcome.
    func downloadBatch(
        _ records: [ItemRecord], report: @escaping @Sendable (Int64, TransferStep) -> Void, placeholderFree: Set<String> = [],
        policies: InheritedPolicies? = nil
    ) async
        -> [(ItemRecord, Result<ItemRecord, FileProviderError>)]
    {
        let (mine, waits, task) = downloads.withLock {
            map -> ([ItemRecord], [(ItemRecord, SharedDownload)], Task<[Result<ItemRecord, FileProviderError>], Never>?) in
            var mine: [ItemRecord] = []
            var waits: [(ItemRecord, SharedDownload)] = []
            for record in records {
                if let running = map[record.identifier] {
                    waits.append((record, running))
                } else {
                    mine.append(record)
                }
            }
            guard !mine.isEmpty else { return (mine, waits, nil) }
            let batch = mine
            let task = Task { [self] in
                await self.performBatch(batch, report: report, placeholderFree: placeholderFree, policies: policies)
            }
            for (index, record) in mine.enumerated() { map[record.identifier] = SharedDownload(task: task, index: index) }
            return (mine, waits, task)
        }
        var results: [(ItemRecord, Result<ItemRecord, FileProviderError>)] = []
        if let task {
            let outcomes = await withTaskCancellationHandler {
                await task.value
            } onCancel: {
                task.cancel()
            }
            for (index, record) in mine.enumerated() {
                results.append((record, index < outcomes.count ? outcomes[index] : .failure(FileProviderError.notStarted)))
            }
        }
        for (record, running) in waits {
            do throws(FileProviderError) {
                results.append((record, .success(try await running.value())))
            } catch {
                results.append((record, .failure(error)))
            }
        }
        return results
    }

    /// Downloads a batch of small files with three hand-offs for the whole batch instead of
    /// several per file: one job on the executor checks which are materialized meanwhile (one
    /// database read), promises the space and creates the staging files (only their folders
    /// for a backend that creates its destinations,
    /// ``BackendCapabilities/createsFetchDestinations``); the backend fetches
    /// the rest in one call (``Backend/fetchContents(_:progress:)``); one job places them
    /// (checked and stamped each, noted together in one transaction, then renamed: ``place(_:_:staging:placeholderAbsent:folders:sha256:policies:)``'s
    /// steps; never cut short) or cleans up after each failure
    /// (``failed(_:_:staging:ticket:)``). Failed items leave ``downloads``; placed ones stay
    /// until their batch is recorded. Returns an outcome per record, in order.
    func performBatch(
        _ records: [ItemRecord], report: @escaping @Sendable (Int64, TransferStep) -> Void, placeholderFree: Set<String> = [],
        policies: InheritedPolicies? = nil
    ) async
        -> [Result<ItemRecord, FileProviderError>]
    {
        let policies = policies ?? InheritedPolicies(store: store, domainID: domainID)
        var results = await fetchAndPlace(records, report: report, placeholderFree: placeholderFree, policies: policies)
        // Bytes that are not the store's are never placed: each such file is fetched once more.
        for (index, result) in results.enumerated() {
            guard case .failure(let error) = result, HashMismatch.isMismatch(error) else { continue }
            context.logger.warning("\(error.message); fetching it once more")
            results[index] = await fetchAndPlace([records[index]], report: report, placeholderFree: placeholderFree, policies: policies)[0]
            if case .failure(let again) = results[index], HashMismatch.isMismatch(again) { await recordMismatch(again, of: records[index]) }
        }
        var failedItems: [ItemIdentifier] = []
        for (index, result) in results.enumerated() {
            if case .failure = result { failedItems.append(records[index].identifier) }
        }
        if !failedItems.isEmpty {
            downloads.withLock { map in
                for identifier in failedItems { map.removeValue(forKey: identifier) }
            }
        }
        return results
    }

    /// What the first job of a batch found for one file.
    private enum Prepared: Sendable {
        /// Materialized meanwhile (by another process, or a request recorded since): its record.
        case done(ItemRecord)
        /// Space promised and staging file created (only its folder made, for a backend that
        /// creates its destinations).
        case staged(path: String, ticket: SpaceReservations.Ticket)
        case failed(FileProviderError)
    }

    private func fetchAndPlace(
        _ records: [ItemRecord], report: @escaping @Sendable (Int64, TransferStep) -> Void, placeholderFree: Set<String>,
        policies: InheritedPolicies
    ) async
        -> [Result<ItemRecord, FileProviderError>]
    {
        let replica = self.replica
        let store = self.store
        let space = self.space
        let domainID = self.domainID
        // A backend that creates its destinations gets none made for it: only their folders,
        // each once per batch (at most 16 `mkdir`s, however many files).
        let createsDestinations = backend.capabilities.createsFetchDestinations
        let prepared: [Prepared]
        do {
            prepared = try await executor.run { () -> [Prepared] in
                let current = (try? store.materializedItems(domainID: domainID, identifiers: records.map(\.identifier))) ?? [:]
                var prepared: [Prepared] = []
                var wanted: [(index: Int, size: Int64, stagingFile: String)] = []
                for (index, record) in records.enumerated() {
                    if let done = current[record.identifier], done.state == .materialized, !done.isOutdated,
                        replica.fingerprint(atPath: replica.path(done.path)) != nil
                    {
                        prepared.append(.done(done))
                    } else {
                        prepared.append(.failed(FileProviderError.notStarted))
                        wanted.append((index, record.size, replica.stagingPath(named: Self.stagingName(for: record.identifier))))
                    }
                }
                let tickets = space.reserve(wanted.map { ($0.size, $0.stagingFile) }, folder: replica.staging.path)
                var madeFolders = Set<Substring>()
                for (file, ticket) in zip(wanted, tickets) {
                    do throws(FileProviderError) {
                        let ticket = try ticket.get()
                        do throws(FileProviderError) {
                            if createsDestinations {
                                let folder = file.stagingFile[..<(file.stagingFile.lastIndex(of: "/") ?? file.stagingFile.endIndex)]
                                if !madeFolders.contains(folder) {
                                    try replica.makeStagingFolder(holding: file.stagingFile)
                                    madeFolders.insert(folder)
                                }
                            } else {
                                try replica.prepareStagingFile(atPath: file.stagingFile, truncate: true)
                            }
                        } catch {
                            space.release(ticket)
                            throw error
                        }
                        prepared[file.index] = .staged(path: file.stagingFile, ticket: ticket)
                    } catch {
                        prepared[file.index] = .failed(error)
                    }
                }
                return prepared
            }
        } catch {
            return records.map { _ in .failure(error) }
        }
        var staged: [(index: Int, path: String, ticket: SpaceReservations.Ticket)] = []
        for (index, step) in prepared.enumerated() {
            if case .staged(let path, let ticket) = step { staged.append((index, path, ticket)) }
        }
        var fetched: [Result<Item, FileProviderError>] = []
        // Each file hashed as the backend writes it (``ContentSink``).
        let sinks = staged.map { _ in FastSHA256.sink() }
        if !staged.isEmpty {
            let requests = staged.map {
                ContentRequest(identifier: records[$0.index].identifier, destination: URL(fileURLWithPath: $0.path, isDirectory: false))
            }
            // Backends report positions in each file: only what is new counts.
            let positions = Mutex([Int64](repeating: 0, count: requests.count))
            let backend = self.backend
            fetched = await ContentSink.feeding(Dictionary(uniqueKeysWithValues: zip(requests.map(\.destination), sinks))) {
                () async -> [Result<Item, FileProviderError>] in
                await backend.fetchContents(requests) { index, completed, _ in
                    let delta = positions.withLock { last -> Int64 in
                        guard last.indices.contains(index), completed > last[index] else { return 0 }
                        defer { last[index] = completed }
                        return completed - last[index]
                    }
                    if delta > 0 { report(delta, .transferred) }
                }
            }
        }
        let hashes = await FastSHA256.finish(sinks, fetched)
        let outcomes = fetched
        let placing = staged
        // Placing finished downloads is never cut short: staging files would stay behind.
        let placed: [Result<ItemRecord, FileProviderError>]
        do {
            placed = try await executor.runToCompletion { [self] () -> [Result<ItemRecord, FileProviderError>] in
                // Each staging folder opened once for the batch: its files are dated, read and
                // renamed by name, not by walking their whole paths three times each.
                let folders = StagingFolders()
                defer { folders.close() }
                var results: [Result<ItemRecord, FileProviderError>] = prepared.map { step in
                    switch step {
                    case .done(let record): return .success(record)
                    case .failed(let error): return .failure(error)
                    case .staged: return .failure(FileProviderError.notStarted)
                    }
                }
                // Each file checked, dated and stamped; then all noted in one transaction; then
                // each renamed into place.
                var staged: [(index: Int, download: StagedDownload)] = []
                for (position, file) in placing.enumerated() {
                    let record = records[file.index]
                    let outcome = position < outcomes.count ? outcomes[position] : .failure(FileProviderError.notStarted)
                    switch outcome {
                    case .success(let item):
                        space.release(file.ticket)
                        do throws(FileProviderError) {
                            staged.append(
                                (
                                    file.index,
                                    try stage(
                                        record, item, staging: file.path, folders: folders,
                                        sha256: position < hashes.count ? hashes[position] : nil, policies: policies)
                                ))
                        } catch {
                            results[file.index] = .failure(error)
                        }
                    case .failure(let error):
                        results[file.index] = .failure(failed(record, error, staging: file.path, ticket: file.ticket))
                        space.release(file.ticket)
                    }
                }
                note(staged.map(\.download.noted))
                for (index, download) in staged {
                    let absent = !placeholderFree.isEmpty && placeholderFree.contains(download.stored.path)
                    do throws(FileProviderError) {
                        results[index] = .success(try settle(download, placeholderAbsent: absent, folders: folders))
                    } catch {
                        results[index] = .failure(error)
                    }
                }
                return results
            }
        } catch {
            for file in placing { space.release(file.ticket) }
            return records.map { _ in .failure(error) }
        }
        for (index, result) in placed.enumerated() {
            if case .success = result, case .staged = prepared[index] { report(0, .finished) }
        }
        return placed
    }
}
