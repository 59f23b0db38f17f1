import Foundation
import ProviderCore
import ProviderStore

/// Drops downloaded contents for `evict` (`stopProvidingItem`): swaps materialized files for
/// placeholders, punches out the fetched ranges of partly present files in a dataless replica,
/// refuses pinned files and files with local changes. Built per operation by
/// ``DomainController``; ``PolicySetter`` and sync down use its ``evictFile(_:)``.
struct ManualEviction: Sendable {
    let context: DomainContext
    let reader: RecordReader

    var domain: DomainRecord { context.domain }
    var domainID: Int64 { context.domainID }
    var backend: any Backend { context.backend }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func location(_ path: String) -> String { context.location(path) }
    func display(_ path: String) -> String { context.display(path) }

    /// ``DomainController/evict(paths:recursive:)``.
    func evict(paths: [String], recursive: Bool) async -> [ItemOutcome] {
        let collector = OutcomeCollector()
        await evict(paths: paths, recursive: recursive, outcomes: collector.handler)
        return collector.outcomes
    }

    /// ``DomainController/evict(paths:recursive:outcomes:)``.
    func evict(paths: [String], recursive: Bool, outcomes report: OutcomeHandler) async {
        await PoolCheck.during("evict") { await evicting(paths: paths, recursive: recursive, outcomes: report) }
    }

    private func evicting(paths: [String], recursive: Bool, outcomes report: OutcomeHandler) async {
        // The records named and the policies, in one job on the executor.
        let targets: RecordReader.Targets
        do {
            targets = try await reader.targets(paths, policies: true)
        } catch {
            return report(paths.map { ItemOutcome(path: location($0), error: error) })
        }
        for (path, found) in zip(paths, targets.records) {
            var outcomes: [ItemOutcome] = []
            defer { report(outcomes) }
            if Task.isCancelled {
                outcomes.append(ItemOutcome(path: location(path), error: FileProviderError.notStarted))
                continue
            }
            do {
                let target = try found.get()
                let policies = try targets.policies.get()
                if let holder = policies.pinHolder(of: target) { throw pinnedError(path, holder: holder) }
                let (store, domainID) = (store, domainID)
                var refused = false
                if target.kind == .folder && recursive {
                    // A page of the subtree at a time: any size in bounded memory.
                    try await reader.forEachSubtreePage(below: target.path) { page throws(FileProviderError) in
                        let files = page.filter { $0.kind == .file }
                        report(outcomes + (try await evictFiles(files, of: target, policies: policies, refused: &refused)))
                        outcomes.removeAll()
                        return true
                    }
                } else {
                    let files =
                        target.kind == .folder
                        ? try await executor.run { try store.children(domainID: domainID, parent: target.identifier) }
                            .filter { $0.kind == .file } : [target]
                    outcomes += try await evictFiles(files, of: target, policies: policies, refused: &refused)
                }
                if target.kind == .file && target.state != .materialized && !refused {
                    outcomes.append(ItemOutcome(path: location(path), error: nil))
                }
            } catch {
                outcomes.append(ItemOutcome(path: location(path), error: FileProviderError.wrap(error)))
            }
        }
    }

    /// ``evict(paths:recursive:)`` of some of the files `target` stands for: the materialized
    /// ones are swapped for placeholders and saved; in a dataless replica the partly present
    /// ones (asked of the database for these files only) lose their fetched ranges. Sets
    /// `refused` when `target` itself is kept.
    /// Returns an outcome per file evicted or refused (and one naming the root when the
    /// database could not save the evicted files).
    /// - Throws: `localIOFailure` when a partly present file could not be evicted for a failing
    ///   replica or database (the files evicted before it are saved).
    private func evictFiles(
        _ files: [ItemRecord], of target: ItemRecord, policies: PolicyResolver, refused: inout Bool
    ) async throws(FileProviderError) -> [ItemOutcome] {
        var outcomes: [ItemOutcome] = []
        var updated: [ItemRecord] = []
        // Which of the placeholders are partly present, before anything is evicted.
        var partial: [ItemIdentifier: Int64] = [:]
        let placeholders = files.filter { $0.state == .placeholder }.map(\.identifier)
        if replica.layout.keepsPartialContents && !placeholders.isEmpty {
            let (store, domainID) = (store, domainID)
            partial = try await executor.run { try store.partiallyPresent(domainID: domainID, among: placeholders) }
        }
        for file in files where file.state == .materialized {
            if Task.isCancelled {
                outcomes.append(ItemOutcome(path: location(file.path), error: FileProviderError.notStarted))
                continue
            }
            do {
                if let holder = policies.pinHolder(of: file) {
                    throw pinnedError(file.path, holder: holder)
                }
                updated.append(try await evictFile(file))
                outcomes.append(ItemOutcome(path: location(file.path), error: nil))
            } catch {
                outcomes.append(ItemOutcome(path: location(file.path), error: FileProviderError.wrap(error)))
            }
        }
        // Partly present files of a dataless replica (progressive hydration): their
        // fetched ranges go, as automatic eviction takes them.
        if replica.layout.keepsPartialContents {
            let evictor = FileEvictor(
                domainID: domainID, domainName: domain.name, replica: replica, store: store, method: .lease,
                keepsFlags: backend.capabilities.supportsFileSystemFlags)
            for file in files where file.state == .placeholder && partial[file.identifier] != nil {
                if policies.pinHolder(of: file) != nil { continue }
                let outcome: FileEvictor.Outcome
                do {
                    outcome = try await executor.run { try evictor.evictPartial(named: file) }
                } catch {
                    outcomes += await save(updated)
                    throw error
                }
                if case .kept(let why) = outcome {
                    let error = FileProviderError(.nonEvictable, "\(display(file.path)) was not evicted: \(why)")
                    outcomes.append(ItemOutcome(path: location(file.path), error: error))
                    if file.identifier == target.identifier { refused = true }
                } else if file.identifier != target.identifier {
                    outcomes.append(ItemOutcome(path: location(file.path), error: nil))
                }
            }
        }
        return outcomes + (await save(updated))
    }

    /// Saves evicted files' records (on the executor, to the end even when the task is
    /// cancelled: the files are already placeholders); returns an outcome naming the root when
    /// the database fails.
    private func save(_ evicted: [ItemRecord]) async -> [ItemOutcome] {
        if evicted.isEmpty { return [] }
        do {
            let (store, domainID) = (store, domainID)
            try await executor.runToCompletion { try store.apply(domainID: domainID, upserts: evicted, deletions: []) }
            return []
        } catch {
            return [ItemOutcome(path: location(""), error: error)]
        }
    }

    /// The refusal to evict an item kept by an eager policy, naming where the policy is set and
    /// how to change it.
    private func pinnedError(_ path: String, holder: String) -> FileProviderError {
        let through = holder == path ? "" : " through \(display(holder))"
        return FileProviderError(
            .nonEvictable,
            "\(display(path)) is pinned (policy eager\(through)); 'fileproviderctl policy \(display(holder)) lazy' makes it evictable")
    }

    /// Swaps one file for its placeholder (a dataless file in a `dataless` replica) and forgets
    /// its present ranges; returns its record as a placeholder, for the caller to save.
    /// - Throws: `unsyncedEdits` when the file has local changes not uploaded, or a local
    ///   `chmod` not sent yet to a store that keeps the executable bit (nothing is evicted);
    ///   `localIOFailure` when the replica or the database fails.
    func evictFile(_ record: ItemRecord) async throws(FileProviderError) -> ItemRecord {
        var updated = record
        updated.markPlaceholder()
        let metadata = PlaceholderMetadata(domain: domain.name, record: updated)
        let replica = self.replica
        let keepsFlags = backend.capabilities.supportsFileSystemFlags
        try await executor.run { [self] in
            let path = replica.path(record.path)
            if let print = replica.fingerprint(atPath: path) {
                if replica.hasLocalChanges(record, print) {
                    throw FileProviderError(
                        .unsyncedEdits, "\(display(record.path)) has local changes that are not uploaded; nothing was evicted")
                }
                if keepsFlags && record.state == .materialized && print.isRegularFile && print.isExecutable != record.isExecutable {
                    throw FileProviderError(
                        .unsyncedEdits,
                        "\(display(record.path)) has a local change of its executable bit that is not sent yet; sync, then evict")
                }
            }
            // Present ranges (only a dataless replica has them) are forgotten before the swap: a
            // crash between the two leaves bytes on disk that are not recorded (fetched again),
            // never recorded ranges that are holes.
            if replica.layout.keepsPartialContents { try store.removePresentRanges(domainID: domainID, identifier: record.identifier) }
            try replica.replaceWithPlaceholder(record.path, metadata)
        }
        // Ranges a fill recorded during the swap were of the file that is gone.
        if replica.layout.keepsPartialContents {
            let (store, domainID) = (store, domainID)
            try await executor.runToCompletion { try store.removePresentRanges(domainID: domainID, identifier: record.identifier) }
        }
        return updated
    }
}
