import Foundation
import ProviderCore
import ProviderStore

/// Sets content policies (`policy`, `pin`, `unpin`) and acts on them: downloads what became
/// eager (through the ``Materializer``), evicts what became online-only; and evicts, for sync
/// down, files changed in the store under a policy that says so. Built per operation by
/// ``DomainController``. What each policy does now:
///
/// - ``ContentPolicy/eager``: downloads the files (a folder's, all below it); later syncs
///   download what is added below it, and `evict` refuses them.
/// - ``ContentPolicy/onlineOnly``: evicts the downloaded files now (in a `dataless` replica
///   partly downloaded ones too). A file that a program has open is refused with
///   `nonEvictable`, a file with local changes not uploaded with `unsyncedEdits`; both stay
///   and are evicted later (automatic eviction takes online-only files once they are
///   closed and uploaded).
/// - ``ContentPolicy/lazy``, ``ContentPolicy/evictOnRemoteUpdate``: nothing now; the
///   files stay as they are until evicted or changed in the store.
struct PolicySetter: Sendable {
    let materializer: Materializer
    let eviction: ManualEviction

    var context: DomainContext { materializer.context }
    var reader: RecordReader { materializer.reader }
    var domain: DomainRecord { context.domain }
    var domainID: Int64 { context.domainID }
    var backend: any Backend { context.backend }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func location(_ path: String) -> String { context.location(path) }
    func display(_ path: String) -> String { context.display(path) }
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await context.blocking(body)
    }

    /// ``DomainController/setPolicy(_:paths:events:)``.
    func setPolicy(_ policy: ContentPolicy?, paths: [String], events: EventHandler? = nil) async -> (
        changes: [PolicyChange], outcomes: [ItemOutcome]
    ) {
        await PoolCheck.during("setPolicy") { await settingPolicy(policy, paths: paths, events: events) }
    }

    private func settingPolicy(_ policy: ContentPolicy?, paths: [String], events: EventHandler?) async -> (
        changes: [PolicyChange], outcomes: [ItemOutcome]
    ) {
        var outcomes: [ItemOutcome] = []
        var named: [(path: String, kind: ItemKind, cleared: [String])] = []
        // Every path's policy, then the policies as they are now, in one job on the executor.
        let written: [Result<(kind: ItemKind, cleared: [String]), FileProviderError>]
        let resolved: Result<PolicyResolver, FileProviderError>
        do {
            (written, resolved) = try await executor.run { [self] in
                let written = paths.map { path -> Result<(kind: ItemKind, cleared: [String]), FileProviderError> in
                    do throws(FileProviderError) {
                        let target = try reader.record(at: path)
                        let cleared = try store.setContentPolicy(
                            policy, domainID: domainID, path: path, clearingBelow: target.kind == .folder)
                        return .success((target.kind, cleared))
                    } catch {
                        return .failure(error)
                    }
                }
                guard written.contains(where: { (try? $0.get()) != nil }) else { return (written, .success(PolicyResolver.none)) }
                do throws(FileProviderError) {
                    return (written, .success(try context.policies()))
                } catch {
                    return (written, .failure(error))
                }
            }
        } catch {
            return ([], paths.map { ItemOutcome(path: location($0), error: error) })
        }
        for (path, result) in zip(paths, written) {
            switch result {
            case .success(let done): named.append((path, done.kind, done.cleared))
            case .failure(let error): outcomes.append(ItemOutcome(path: location(path), error: error))
            }
        }
        if named.isEmpty { return ([], outcomes) }
        let resolver: PolicyResolver
        do {
            resolver = try resolved.get()
        } catch {
            return ([], outcomes + named.map { ItemOutcome(path: location($0.path), error: error) })
        }
        var changes: [PolicyChange] = []
        var download: [String] = []
        var evict: [String] = []
        for (path, kind, cleared) in named {
            // Its own policy is the one just written (a folder's is in the resolver too).
            let now = resolver.effective(path, own: policy)
            changes.append(
                PolicyChange(path: location(path), policy: now.policy, setOn: now.setOn.map(location), cleared: cleared.map(location)))
            switch now.policy {
            case .eager where kind != .symlink: download.append(path)
            case .onlineOnly where kind != .symlink: evict.append(path)
            default: break
            }
        }
        // The files already downloaded show their policy (pinned or not) to every program.
        await StatusRefresher(context: context).refresh(subtreesAt: named.filter { $0.kind != .symlink }.map(\.path))
        if !download.isEmpty { outcomes += await materializer.materialize(paths: download, recursive: true, events: events) }
        if !evict.isEmpty { outcomes += await evictOnlineOnly(paths: evict) }
        return (changes, outcomes)
    }

    /// Evicts the downloaded files at `paths` (a folder: every file below it) that are
    /// online-only now: materialized ones and, in a `dataless` replica, partly downloaded ones,
    /// each as automatic eviction does it (``FileEvictor``: checked and swapped while no program
    /// has it open). A file with local changes or an upload not finished is refused with
    /// `unsyncedEdits`, one a program has open (or that is otherwise busy) with `nonEvictable`,
    /// each saying when it goes instead. Each eviction is logged in the `eviction` table, as
    /// automatic eviction's are. Never throws.
    func evictOnlineOnly(paths: [String]) async -> [ItemOutcome] {
        var outcomes: [ItemOutcome] = []
        let unfinished: Set<ItemIdentifier>
        let targets: RecordReader.Targets
        let (store, domainID, dataless) = (store, domainID, replica.layout.keepsPartialContents)
        do {
            // Bounded by the journal (operations not finished), not by the domain.
            unfinished = try await executor.run { try store.itemsWithUnfinishedOperations(domainID: domainID) }
            targets = try await reader.targets(paths, policies: true)
        } catch {
            return paths.map { ItemOutcome(path: location($0), error: error) }
        }
        let files = FileEvictor(
            domainID: domainID, domainName: domain.name, replica: replica, store: store, method: .lease,
            keepsFlags: backend.capabilities.supportsFileSystemFlags)
        // Logged as automatic eviction logs what it takes (`status` shows them).
        var log: [EvictionRecord] = []
        for (path, found) in zip(paths, targets.records) {
            do {
                let policies = try targets.policies.get()
                let target = try found.get()
                // A folder's subtree a page at a time (any size in bounded memory); each page's
                // evictions are logged before the next is read. The bytes present of the page's
                // partly downloaded files are read with it (`partial`).
                func evictPage(_ records: [ItemRecord], partial: [ItemIdentifier: Int64]) async {
                    for file in records {
                        let bytes: Int64
                        if file.state == .materialized {
                            bytes = file.size
                        } else if let present = partial[file.identifier] {
                            bytes = present
                        } else {
                            continue
                        }
                        if Task.isCancelled {
                            outcomes.append(ItemOutcome(path: location(file.path), error: FileProviderError.notStarted))
                            continue
                        }
                        // Another policy set below meanwhile (by another process) wins.
                        let (policy, setOn) = policies.resolve(file)
                        guard policy == .onlineOnly else { continue }
                        let shown = location(file.path)
                        let notUploaded = FileProviderError(
                            .unsyncedEdits,
                            "\(display(file.path)) has local changes that are not uploaded; not evicted now (online-only: evicted once a sync has uploaded them)"
                        )
                        if unfinished.contains(file.identifier) {
                            outcomes.append(ItemOutcome(path: shown, error: notUploaded))
                            continue
                        }
                        let candidate = EvictionCandidate.file(file, bytes: bytes, isPartial: file.state != .materialized)
                        let reason = EvictionReason.onlineOnly(setOn: "/" + (setOn ?? ""))
                        do {
                            switch try await executor.run({ try files.evict(candidate, for: reason) }) {
                            case .evicted(let bytes):
                                outcomes.append(ItemOutcome(path: shown, error: nil))
                                log.append(EvictionRecord(domainID: domainID, path: file.path, size: bytes, reason: reason.description))
                            case .gone:
                                // Evicted, moved or deleted meanwhile: nothing of it to drop here.
                                continue
                            case .kept(let why) where why.hasPrefix("has local changes"):
                                outcomes.append(ItemOutcome(path: shown, error: notUploaded))
                            case .kept(let why):
                                outcomes.append(
                                    ItemOutcome(
                                        path: shown,
                                        error: FileProviderError(
                                            .nonEvictable,
                                            "\(display(file.path)) is not evicted now: \(why) (online-only: automatic eviction takes it once it can)"
                                        )))
                            }
                        } catch {
                            outcomes.append(ItemOutcome(path: shown, error: error))
                        }
                    }
                    if log.isEmpty { return }
                    do {
                        let (store, logged) = (store, log)
                        try await executor.runToCompletion { try store.recordEvictions(logged) }
                    } catch {
                        outcomes.append(ItemOutcome(path: location(""), error: error))
                    }
                    log.removeAll()
                }
                // The bytes present of `files` that are partly downloaded (a dataless replica).
                func presentBytes(of files: [ItemRecord]) async throws(FileProviderError) -> [ItemIdentifier: Int64] {
                    let placeholders = files.filter { $0.state == .placeholder }.map(\.identifier)
                    if !dataless || placeholders.isEmpty { return [:] }
                    return try await executor.run { try store.partiallyPresent(domainID: domainID, among: placeholders) }
                }
                if target.kind == .folder {
                    try await reader.forEachSubtreePage(below: target.path) { page throws(FileProviderError) in
                        let files = page.filter { $0.kind == .file }
                        await evictPage(files, partial: try await presentBytes(of: files))
                        return true
                    }
                } else {
                    await evictPage([target], partial: try await presentBytes(of: [target]))
                }
            } catch {
                outcomes.append(ItemOutcome(path: location(path), error: error))
            }
        }
        return outcomes
    }

    /// Sync down's handling of files whose contents changed in the store under a policy that
    /// evicts instead of downloading again (``ContentPolicy/evictOnRemoteUpdate``,
    /// ``ContentPolicy/onlineOnly``): outdated materialized files, and partly downloaded files
    /// of a `dataless` replica whose present ranges are of an older version, become
    /// placeholders (dataless files of the new size). Returns the files that could not be
    /// evicted because they hold local changes: today's rules apply to them (the download
    /// refuses to overwrite local changes; the next sync uploads them, or keeps both). Each
    /// eviction is logged in the `eviction` table, as automatic eviction's are.
    func evictUpdated(_ records: [ItemRecord], policies: PolicyResolver, report: inout SyncReport) async -> [ItemRecord] {
        var keep: [ItemRecord] = []
        var updated: [ItemRecord] = []
        var log: [EvictionRecord] = []
        // Of these records only (a batch of what changed), read before any is evicted.
        let (store, domainID) = (self.store, self.domainID)
        let placeholders = records.filter { $0.state == .placeholder }.map(\.identifier)
        let partial =
            replica.layout.keepsPartialContents
            ? ((try? await blocking { () throws(FileProviderError) in
                try store.partiallyPresent(domainID: domainID, among: placeholders)
            }) ?? [:]) : [:]
        for record in records {
            do {
                updated.append(try await eviction.evictFile(record))
                report.evictedOnUpdate += 1
                let (policy, setOn) = policies.resolve(record)
                let bytes = record.state == .materialized ? (record.localSize ?? 0) : (partial[record.identifier] ?? 0)
                log.append(
                    EvictionRecord(
                        domainID: domainID, path: record.path, size: max(0, bytes),
                        reason: "changed in the store (\(policy.rawValue), set on /\(setOn ?? ""))"))
            } catch where error.code == .unsyncedEdits {
                keep.append(record)
            } catch {
                report.notices.append("\(display(record.path)): not evicted after its change in the store: \(error.message)")
            }
        }
        do throws(FileProviderError) {
            try await blocking { [store, domainID, updated, log] () throws(FileProviderError) in
                try store.apply(domainID: domainID, upserts: updated, deletions: [])
                try store.recordEvictions(log)
            }
        } catch {
            report.notices.append("\(display("")): \(error.message)")
        }
        return keep
    }
}
