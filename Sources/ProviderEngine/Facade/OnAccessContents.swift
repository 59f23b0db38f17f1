import Foundation
import Logging
import ProviderCore
import ProviderStore

/// The engine's side of filling files on access (`serve`'s on-access handler, in
/// ProviderService): the item at a path, whole fills, ranged fetches of partially present
/// files (one ``ProgressiveHydrator`` for every domain), read-ahead batches, and what is
/// recorded (uses, failures, eviction requests). It routes each request to the domain's
/// controller as the facade does; the service never reaches a ``Downloader`` itself.
///
/// Blocking work (database reads and writes) runs on the manager's executor. Any thread.
package final class OnAccessContents: Sendable {
    let manager: ProviderManager
    /// The partially present files of progressive domains.
    let hydrator: ProgressiveHydrator

    package init(manager: ProviderManager, logger: Logger) {
        self.manager = manager
        hydrator = ProgressiveHydrator(logger: logger)
    }

    /// The item the database records at `path` of the domain `domainID`, or `nil`.
    /// - Throws: `localIOFailure` when the database cannot be read.
    package func item(domainID: Int64, path: String) async throws(FileProviderError) -> ItemRecord? {
        let store = manager.store
        return try await manager.blocking { () throws(FileProviderError) in try store.item(domainID: domainID, path: path) }
    }

    /// Fills the dataless file of `record` whole, where it stands (``Downloader/fillInPlace(_:)``).
    /// - Throws: `providerDomainNotFound` for an unknown domain; what
    ///   ``Downloader/fillInPlace(_:)`` throws.
    package func fill(_ record: ItemRecord, domain: String) async throws(FileProviderError) {
        _ = try await manager.controller(for: domain).downloader.fillInPlace(record)
    }

    /// Makes bytes `range` of a partially present file present
    /// (``ProgressiveHydrator/provide(_:key:changeTime:range:downloader:)``); `true` when the
    /// file is complete.
    /// - Throws: `providerDomainNotFound` for an unknown domain; what the hydrator throws.
    package func fetch(
        _ record: ItemRecord, domain: String, file: ProgressiveHydrator.FileKey, changeTime: Int64, range: Range<Int64>
    ) async throws(FileProviderError) -> Bool {
        let downloader = try await manager.controller(for: domain).downloader
        return try await hydrator.provide(record, key: file, changeTime: changeTime, range: range, downloader: downloader)
    }

    /// Completes a partially present file a program wrote into
    /// (``ProgressiveHydrator/modified(_:key:changeTime:downloader:)``).
    /// - Throws: `providerDomainNotFound` for an unknown domain; what the hydrator throws.
    package func complete(written record: ItemRecord, domain: String, file: ProgressiveHydrator.FileKey, changeTime: Int64)
        async throws(FileProviderError)
    {
        let downloader = try await manager.controller(for: domain).downloader
        try await hydrator.modified(record, key: file, changeTime: changeTime, downloader: downloader)
    }

    /// Whether bytes `range` of `file` are known present. No system call.
    package func isPresent(_ file: ProgressiveHydrator.FileKey, range: Range<Int64>, changeTime: Int64) -> Bool {
        hydrator.isPresent(file, range: range, changeTime: changeTime)
    }

    /// Whether bytes of the file at `path` of `domain` are being fetched.
    package func isFetching(domain: String, path: String) -> Bool { hydrator.isFetching(domain: domain, path: path) }

    /// A program opened `file` (``ProgressiveHydrator/opened(_:)``).
    package func opened(_ file: ProgressiveHydrator.FileKey) { hydrator.opened(file) }

    /// The siblings of the file at `path` that a read-ahead batch may take (files smaller than
    /// ``Downloader/batchableSize``, not downloaded), and the bytes the domain's cache budget
    /// and the home's leave free (`Int64.max` without either).
    /// - Throws: `localIOFailure` when the database cannot be read.
    package func readAheadCandidates(domainID: Int64, path: String) async throws(FileProviderError)
        -> (files: [ItemRecord], room: Int64)
    {
        let store = manager.store
        return try await manager.blocking { () throws(FileProviderError) -> (files: [ItemRecord], room: Int64) in
            guard let file = try store.item(domainID: domainID, path: path) else { return ([], 0) }
            let files = try store.children(domainID: domainID, parent: file.parentIdentifier)
                .filter { $0.kind == .file && $0.state != .materialized && $0.size >= 0 && $0.size < Downloader.batchableSize }
            return (files, try Self.room(store, domainID: domainID))
        }
    }

    /// Fills the dataless files of `records` in one batch (``Downloader/fillInPlace(batch:)``);
    /// every record fails with the domain's error when its controller cannot be made.
    package func fill(batch records: [ItemRecord], domain: String) async -> [Result<ItemRecord, FileProviderError>] {
        let downloader: Downloader
        do { downloader = try await manager.controller(for: domain).downloader } catch {
            return records.map { _ in .failure(error) }
        }
        return await downloader.fillInPlace(batch: records)
    }

    /// Remembers that a program used the file at `path` (the ``UseRecorder`` writes it down).
    package func used(domainID: Int64, path: String) { manager.useRecorder.used(domainID: domainID, path: path) }

    /// Records `message` as the last error of the item at `path` (shown by `why`) and
    /// ``ReplicaStatus/error`` on its file (a fetch on access failed); nothing when the database
    /// cannot be written.
    package func recordFailure(_ message: String, domainID: Int64, path: String) async {
        let store = manager.store
        let domain = try? await manager.blocking { () throws(FileProviderError) -> String? in
            guard var record = try store.item(domainID: domainID, path: path) else { return nil }
            record.lastError = message
            try store.apply(domainID: domainID, upserts: [record], deletions: [])
            return try store.domain(id: domainID)?.name
        }
        guard let domain = domain ?? nil, let replica = try? await manager.controller(for: domain).replica else { return }
        _ = try? await manager.blocking { ReplicaStatus.markFetchFailed(path, in: replica, domain: domain) }
    }

    /// Asks `serve`'s eviction loop for a pass soon.
    package func requestEviction() { manager.requestEviction() }

    /// Writes down the uses remembered so far.
    package func flushUses() async { await manager.useRecorder.flush() }

    /// The bytes the domain's cache budget and the home's leave free (`Int64.max` without
    /// either). Blocking.
    /// - Throws: `localIOFailure` when the database cannot be read.
    private static func room(_ store: MetadataStore, domainID: Int64) throws(FileProviderError) -> Int64 {
        var room = Int64.max
        let domains = try store.domains()
        if let budget = domains.first(where: { $0.id == domainID })?.cacheBudget {
            let used = try store.cacheUsage(domainID: domainID).total
            room = max(0, budget - used)
        }
        guard let budget = try CacheSettings.load(from: store).settings.cacheBudget else { return room }
        var used: Int64 = 0
        for domain in domains {
            guard let id = domain.id else { continue }
            let usage = try store.cacheUsage(domainID: id).total
            let (sum, overflow) = used.addingReportingOverflow(usage)
            used = overflow ? .max : sum
        }
        return min(room, max(0, budget - used))
    }
}
