import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

/// Automatic eviction (Apple's system evicting under storage pressure, rclone's
/// `--vfs-cache-max-size`): keeps the downloaded contents of a home's domains under their
/// budgets and the replicas' file systems above the free-space floor, by evicting the least
/// recently used files that may go.
///
/// One pass (``run()``) reads everything afresh from the database (budgets, settings,
/// policies, use), so a change made with `domain set` or `cache` applies at the next pass, and:
/// 1. evicts every downloaded `online-only` file that is not open, whatever the budgets;
/// 2. for each domain over its own budget (`domain.cacheBudget`), evicts its least recently
///    used files until it is under;
/// 3. while all domains of the home together are over the home's budget (setting
///    `cacheBudget`), evicts the least recently used files of all the pass's domains;
/// 4. while a file system holding replicas has less free than the floor (setting
///    `freeSpaceFloor`), evicts the least recently used files of the domains on it.
///
/// What a domain holds is the bytes of its materialized files plus the bytes present of files
/// partly downloaded. Least recently used is by `itemUse.lastUsedAt` (on-access events, local
/// opens, downloads); a file without a recorded use counts as the oldest.
///
/// A file is never evicted when its effective content policy is `eager` (pinned, or in a
/// pinned folder), when it has local changes not uploaded (its fingerprint differs from the
/// one recorded, or the journal holds an unfinished upload, move or deletion of it), or when a
/// program has it open or mapped at the moment of eviction (``ExclusiveFile``). Each domain is
/// evicted from while holding its sync lock, so no sync of it (in any process) runs meanwhile.
///
/// Each eviction is logged with its reason and recorded in the `eviction` table (the last 200
/// of each domain), which `status` shows. A pass first writes the uses its manager's
/// ``UseRecorder`` holds, so a file used a moment ago counts as just used. Blocking work
/// (SQLite, `statvfs`, leases, the file swaps) runs on the manager's ``BlockingExecutor``.
public final class Evictor: Sendable {
    public let manager: ProviderManager
    /// The domains evicted from; `nil` for every domain of the home. The home's budget counts
    /// every domain of the home either way.
    public let domains: [String]?
    /// Whether to wait for a domain's sync lock (`evict --to-budget`), or pass the domain over
    /// until the next pass (`serve`).
    let waitForLocks: Bool
    let method: ExclusiveFile.Method
    let logger: Logger
    /// Evictions kept per domain in the `eviction` table.
    static let historyLimit = 200
    /// Files left listed in a pass's report at most.
    static let keptLimit = 100
    /// Pressures a pass could not relieve, with what they were then: the next passes do not
    /// look through the same files again until something changed, or a minute passed (a file
    /// that was open may be closed by then).
    private let fruitless = Mutex<[String: (signature: [Int64], at: Date)]>([:])
    static let fruitlessRetry: TimeInterval = 60

    /// An evictor for `domains` (`nil`: all) of the manager's home.
    public convenience init(manager: ProviderManager, domains: [String]? = nil, waitForLocks: Bool = true, logger: Logger? = nil) {
        self.init(manager: manager, domains: domains, waitForLocks: waitForLocks, method: .lease, logger: logger)
    }

    package init(manager: ProviderManager, domains: [String]?, waitForLocks: Bool, method: ExclusiveFile.Method, logger: Logger?) {
        self.manager = manager
        self.domains = domains
        self.waitForLocks = waitForLocks
        self.method = method
        self.logger = logger ?? manager.logger
    }

    /// Runs one pass and returns what it did. Cheap when nothing is over: a few aggregate
    /// queries and a `statvfs` per domain.
    /// - Throws: `providerDomainNotFound` for an unknown domain name; `localIOFailure` when the
    ///   database fails; `cancelled` when the task is cancelled (what was evicted is recorded).
    ///   A file that cannot be evicted is a notice of the pass, not an error.
    public func run() async throws(FileProviderError) -> EvictionPass {
        try await PoolCheck.during("eviction") { () async throws(FileProviderError) -> EvictionPass in try await evicting() }
    }

    private func evicting() async throws(FileProviderError) -> EvictionPass {
        let manager = self.manager
        let names = domains
        // Uses this process collected and has not written yet (a file fetched a moment ago) must
        // count, or the newest file could look like the oldest. Another process's last second
        // of uses is not seen.
        await manager.useRecorder.flush()
        let snapshot = try await manager.executor.run { try EvictionSnapshot.take(manager: manager, domains: names) }
        let work = EvictionWork(evictor: self, snapshot: snapshot)
        var failure: FileProviderError?
        do {
            try await work.run()
        } catch {
            failure = error
        }
        work.releaseLocks()
        let records = work.records
        do {
            try await manager.executor.runToCompletion {
                try manager.store.recordEvictions(records, keep: Self.historyLimit)
            }
        } catch {
            work.pass.notices.append("cannot record the evictions: \(error.message)")
        }
        if let failure { throw failure }
        return try await work.finish()
    }

    /// Whether a pressure with this signature was found fruitless lately (then it is not
    /// looked into again now).
    func isFruitless(_ key: String, _ signature: [Int64]) -> Bool {
        fruitless.withLock { memo in
            guard let entry = memo[key] else { return false }
            return entry.signature == signature && Date().timeIntervalSince(entry.at) < Self.fruitlessRetry
        }
    }

    /// Remembers (or with `nil` forgets) that a pressure could not be relieved.
    func noteFruitless(_ key: String, _ signature: [Int64]?) {
        fruitless.withLock { memo in memo[key] = signature.map { ($0, Date()) } }
    }
}

/// What a pass starts from, read in one job on the executor.
struct EvictionSnapshot: Sendable {
    /// Every domain of the home, with what it holds.
    var all: [(record: DomainRecord, usage: CacheUsage)]
    /// The ids of the domains the pass evicts from.
    var scope: Set<Int64>
    var settings: CacheSettings
    var notices: [String]
    /// Per domain of the scope: its folders' explicit policies (a file's own is read with it),
    /// whether any item has an online-only policy of its own, the folder its files are in and
    /// its file system's space.
    var policies: [Int64: [String: ContentPolicy]]
    var hasOnlineOnly: Set<Int64>
    var roots: [Int64: String]
    var spaces: [Int64: FileSystemSpace]

    /// Reads the snapshot. Blocking.
    /// - Throws: `providerDomainNotFound` for an unknown name; `localIOFailure` when the
    ///   database fails.
    static func take(manager: ProviderManager, domains names: [String]?) throws(FileProviderError) -> EvictionSnapshot {
        let store = manager.store
        let records = try store.domains()
        var scope = Set<Int64>()
        if let names {
            for name in names {
                guard let id = try manager.domain(named: name).id else { continue }
                scope.insert(id)
            }
        } else {
            scope = Set(records.compactMap(\.id))
        }
        let (settings, notices) = try CacheSettings.load(from: store)
        var snapshot = EvictionSnapshot(
            all: [], scope: scope, settings: settings, notices: notices, policies: [:], hasOnlineOnly: [], roots: [:], spaces: [:])
        for record in records {
            guard let id = record.id else { continue }
            snapshot.all.append((record, try store.cacheUsage(domainID: id)))
            guard scope.contains(id) else { continue }
            let folders = try store.explicitFolderPolicies(domainID: id)
            snapshot.policies[id] = folders
            var hasOnlineOnly = folders.values.contains(.onlineOnly)
            if !hasOnlineOnly { hasOnlineOnly = try store.hasExplicitPolicy(.onlineOnly, domainID: id) }
            if hasOnlineOnly { snapshot.hasOnlineOnly.insert(id) }
            guard let root = try? manager.replicaRoot(of: record).path else { continue }
            snapshot.roots[id] = root
            snapshot.spaces[id] = FileSystemSpace.measure(root)
        }
        return snapshot
    }
}

/// One domain during a pass.
final class EvictionDomain {
    let record: DomainRecord
    let id: Int64
    let files: FileEvictor
    let root: String
    var usage: CacheUsage
    /// The folders' policies (a candidate brings its file's own).
    let policies: PolicyResolver
    /// Whether an item (a folder or a file) has an online-only policy of its own.
    let hasOnlineOnly: Bool
    /// The domain's sync lock, once taken.
    var lock: DomainLock?
    /// Another process syncs it (or it is being converted): passed over until the next pass.
    var isBusy = false
    /// Items with an upload, move or deletion not finished (read once the lock is held).
    var unfinished: Set<ItemIdentifier> = []
    /// Candidates this pass already took or left.
    var settled: Set<ItemIdentifier> = []

    init(
        record: DomainRecord, id: Int64, files: FileEvictor, root: String, usage: CacheUsage, policies: [String: ContentPolicy],
        hasOnlineOnly: Bool
    ) {
        self.record = record
        self.id = id
        self.files = files
        self.root = root
        self.usage = usage
        self.policies = PolicyResolver(folders: policies)
        self.hasOnlineOnly = hasOnlineOnly
    }

    var name: String { record.name }
}

/// A domain's candidates in least-recently-used order, read a page at a time; candidates the
/// pass settled are skipped.
final class CandidateStream {
    let domain: EvictionDomain
    let below: String?
    private var buffer: [EvictionCandidate] = []
    private var index = 0
    private var cursor = EvictionCursor.start
    private var exhausted = false
    static let pageSize = 128

    init(_ domain: EvictionDomain, below: String? = nil) {
        self.domain = domain
        self.below = below
    }

    /// The next candidate, without taking it; `nil` when there is none (or the domain is busy).
    func peek(_ executor: BlockingExecutor, _ store: MetadataStore) async throws(FileProviderError) -> EvictionCandidate? {
        while true {
            if domain.isBusy { return nil }
            while index < buffer.count {
                if !domain.settled.contains(buffer[index].identifier) { return buffer[index] }
                index += 1
            }
            if exhausted { return nil }
            let (id, after, below) = (domain.id, cursor, self.below)
            let page = try await executor.run {
                try store.evictionCandidates(domainID: id, after: after, below: below, limit: Self.pageSize)
            }
            exhausted = page.count < Self.pageSize
            if let last = page.last { cursor = last.cursor }
            buffer = page
            index = 0
        }
    }

    /// Takes the candidate ``peek(_:_:)`` returned.
    func pop() { index += 1 }
}
