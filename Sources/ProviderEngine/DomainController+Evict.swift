import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// Drops downloaded contents (`stopProvidingItem`): each materialized file is swapped for its
    /// placeholder atomically; a partly present file of a dataless replica loses its fetched
    /// ranges (punched out while no program has it open, else refused with `nonEvictable`).
    /// Folders stand for the files below them.
    ///
    /// Refuses, per item, with `nonEvictable` for items whose content policy is
    /// ``ContentPolicy/eager`` (pinned, itself or through a folder: the message names where the
    /// policy is set and how to change it) and `unsyncedEdits` for files changed locally;
    /// never throws. When the task is cancelled, the files evicted so far are recorded and
    /// every other one gets a `cancelled` outcome.
    public func evict(paths: [String], recursive: Bool) async -> [ItemOutcome] {
        let collector = OutcomeCollector()
        await evict(paths: paths, recursive: recursive, outcomes: collector.handler)
        return collector.outcomes
    }

    /// ``evict(paths:recursive:)`` giving the outcomes to `report` as they come, a page of a
    /// subtree at a time, instead of returning them all: `evict -R` of a million files holds no
    /// million outcomes.
    public func evict(paths: [String], recursive: Bool, outcomes report: OutcomeHandler) async {
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
                if let holder = Self.pinHolder(of: target, policies) { throw pinnedError(path, holder: holder) }
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
                if let holder = Self.pinHolder(of: file, policies) {
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
                if Self.pinHolder(of: file, policies) != nil { continue }
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

    /// The path of the item whose ``ContentPolicy/eager`` policy keeps an item downloaded (the
    /// item itself or the nearest folder above with a policy of its own), else `nil`.
    /// Reads the policies of the folders above it only.
    /// - Throws: `localIOFailure` when the database fails.
    func pinHolder(of record: ItemRecord) throws(FileProviderError) -> String? {
        Self.pinHolder(of: record, try context.policies(along: record.path))
    }

    /// ``pinHolder(of:)`` with the domain's policies given (its own policy is `record`'s).
    static func pinHolder(of record: ItemRecord, _ policies: PolicyResolver) -> String? {
        let (policy, setOn) = policies.resolve(record)
        return policy == .eager ? setOn : nil
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

    /// Pins items: sets their content policy to ``ContentPolicy/eager`` (Apple's "keep
    /// downloaded", cfapi's pinned) and downloads the files, for a folder every file below it,
    /// now and after later syncs. The same as ``setPolicy(_:paths:events:)`` with `.eager`.
    /// Never throws: an outcome per item that failed or was downloaded.
    public func pin(paths: [String], events: EventHandler? = nil) async -> [ItemOutcome] {
        await setPolicy(.eager, paths: paths, events: events).outcomes
    }

    /// Unpins items as cfapi's unpinned: sets their content policy to
    /// ``ContentPolicy/onlineOnly`` and evicts their downloaded files now (a folder's, all
    /// below it). The same as ``setPolicy(_:paths:events:)`` with `.onlineOnly`. Never throws:
    /// the changes made, and an outcome per file evicted or refused (open in a program:
    /// `nonEvictable`; local changes not uploaded: `unsyncedEdits`).
    public func unpin(paths: [String]) async -> (changes: [PolicyChange], outcomes: [ItemOutcome]) {
        await setPolicy(.onlineOnly, paths: paths)
    }

    /// Counts of the domain's items by state.
    public func summary() throws(FileProviderError) -> ItemSummary { try store.summary(domainID: domainID) }
}
