import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

/// The state of one pass of an ``Evictor``: its domains, what it evicted and left, and the
/// phases (online-only files, domain budgets, the home's budget, the free-space floor). Used
/// by one task only.
final class EvictionWork {
    let evictor: Evictor
    let snapshot: EvictionSnapshot
    let executor: BlockingExecutor
    let store: MetadataStore
    var logger: Logger { evictor.logger }
    /// The domains of the scope, by name.
    let domains: [EvictionDomain]
    var pass = EvictionPass()
    var records: [EvictionRecord] = []
    private var keptLeftOut = 0

    init(evictor: Evictor, snapshot: EvictionSnapshot) {
        self.evictor = evictor
        self.snapshot = snapshot
        executor = evictor.manager.executor
        store = evictor.manager.store
        var domains: [EvictionDomain] = []
        for (record, usage) in snapshot.all {
            guard let id = record.id, snapshot.scope.contains(id), let root = snapshot.roots[id] else { continue }
            let replica = Replica(
                root: URL(fileURLWithPath: root), staging: evictor.manager.home.appendingPathComponent("staging/\(id)"),
                layout: ReplicaLayouts.layout(of: record))
            let files = FileEvictor(
                domainID: id, domainName: record.name, replica: replica, store: store, method: evictor.method,
                keepsFlags: evictor.manager.keepsFileSystemFlags(record))
            domains.append(
                EvictionDomain(
                    record: record, id: id, files: files, root: root, usage: usage, policies: snapshot.policies[id] ?? [:],
                    hasOnlineOnly: snapshot.hasOnlineOnly.contains(id)))
        }
        self.domains = domains.sorted { $0.name < $1.name }
        pass.cacheBudget = snapshot.settings.cacheBudget
        pass.freeSpaceFloor = snapshot.settings.freeSpaceFloor
        pass.notices = snapshot.notices
    }

    // MARK: Phases

    func run() async throws(FileProviderError) {
        if evictor.waitForLocks && hasWork {
            // Every lock up front, in name order: two passes waiting for each other's domains
            // would wait forever.
            for domain in domains { _ = try await lock(domain) }
        }
        try await evictOnlineOnly()
        try await keepDomainBudgets()
        try await keepGlobalBudget()
        try await keepFreeSpaceFloor()
    }

    /// Whether anything is over, or online-only files may be downloaded.
    private var hasWork: Bool {
        if domains.contains(where: \.hasOnlineOnly) { return true }
        if domains.contains(where: { domain in domain.record.cacheBudget.map { domain.usage.total > $0 } ?? false }) { return true }
        if let budget = snapshot.settings.cacheBudget, totalUsage > budget { return true }
        if let floor = snapshot.settings.freeSpaceFloor, snapshot.spaces.values.contains(where: { $0.available < floor }) {
            return true
        }
        return false
    }

    /// 1. Every downloaded file whose effective policy is online-only: the files below each
    /// folder set online-only, then the files set online-only themselves (read from the
    /// database a page at a time, not held: a user may have set a million of them).
    private func evictOnlineOnly() async throws(FileProviderError) {
        for domain in domains where domain.hasOnlineOnly {
            let folders = domain.policies.folders.filter { $0.value == .onlineOnly }.keys.sorted()
            for folder in folders {
                let stream = CandidateStream(domain, below: folder)
                while let candidate = try await stream.peek(executor, store) {
                    stream.pop()
                    let resolved = domain.policies.resolve(candidate)
                    guard resolved.policy == .onlineOnly else { continue }
                    _ = try await evict(candidate, in: domain, for: .onlineOnly(setOn: "/" + (resolved.setOn ?? "")))
                }
            }
            let (store, id) = (store, domain.id)
            var after: String?
            repeat {
                if domain.isBusy { break }
                let from = after
                let page = try await executor.run {
                    try store.filesHoldingContents(
                        domainID: id, ownPolicy: .onlineOnly, after: from, limit: CandidateStream.pageSize)
                }
                after = page.next
                for candidate in page.candidates where !domain.settled.contains(candidate.identifier) {
                    if domain.isBusy { break }
                    _ = try await evict(candidate, in: domain, for: .onlineOnly(setOn: "/" + candidate.path))
                }
            } while after != nil
        }
    }

    /// 2. Each domain under its own budget.
    private func keepDomainBudgets() async throws(FileProviderError) {
        for domain in domains {
            guard let budget = domain.record.cacheBudget else { continue }
            guard budget >= 0 else {
                pass.notices.append(
                    "\(domain.name): its cache budget (\(budget)) is negative; it is ignored: set it again with 'fileproviderctl domain set'"
                )
                continue
            }
            guard domain.usage.total > budget else {
                evictor.noteFruitless("domain:\(domain.name)", nil)
                continue
            }
            let key = "domain:\(domain.name)"
            if !evictor.isFruitless(key, [domain.usage.total, budget]) {
                let stream = CandidateStream(domain)
                while domain.usage.total > budget, let candidate = try await stream.peek(executor, store) {
                    stream.pop()
                    _ = try await evict(
                        candidate, in: domain, for: .domainBudget(domain: domain.name, used: domain.usage.total, budget: budget))
                }
            }
            if domain.usage.total > budget {
                if !domain.isBusy { evictor.noteFruitless(key, [domain.usage.total, budget]) }
                pass.notices.append(
                    "\(domain.name) is still over its budget: \(ByteCount.format(domain.usage.total)) used of \(ByteCount.format(budget))\(domain.isBusy ? "; its sync is running, the next pass goes on" : "; what is left is pinned, open or not uploaded")"
                )
            }
        }
    }

    /// The bytes all domains of the home hold: the pass's domains as they are now, the others
    /// as the pass found them.
    private var totalUsage: Int64 {
        var total: Int64 = 0
        let inScope = Dictionary(uniqueKeysWithValues: domains.map { ($0.id, $0.usage.total) })
        for (record, usage) in snapshot.all {
            let bytes = record.id.flatMap { inScope[$0] } ?? usage.total
            total = total.addingReportingOverflow(bytes).overflow ? .max : total + bytes
        }
        return total
    }

    /// 3. All domains together under the home's budget.
    private func keepGlobalBudget() async throws(FileProviderError) {
        guard let budget = snapshot.settings.cacheBudget else { return }
        guard totalUsage > budget else {
            evictor.noteFruitless("global", nil)
            return
        }
        if !evictor.isFruitless("global", [totalUsage, budget]) {
            let streams = domains.map { CandidateStream($0) }
            while totalUsage > budget, let (stream, candidate) = try await nextOldest(streams) {
                _ = try await evict(candidate, in: stream.domain, for: .globalBudget(used: totalUsage, budget: budget))
            }
        }
        if totalUsage > budget {
            if !domains.contains(where: \.isBusy) { evictor.noteFruitless("global", [totalUsage, budget]) }
            pass.notices.append(
                "all domains are still over their common budget: \(ByteCount.format(totalUsage)) used of \(ByteCount.format(budget))")
        }
    }

    /// 4. Each file system holding replicas above the free-space floor.
    private func keepFreeSpaceFloor() async throws(FileProviderError) {
        guard let floor = snapshot.settings.freeSpaceFloor else { return }
        var byDevice: [UInt64: [EvictionDomain]] = [:]
        for domain in domains {
            guard let space = snapshot.spaces[domain.id] else { continue }
            byDevice[space.device, default: []].append(domain)
        }
        for (device, group) in byDevice.sorted(by: { $0.key < $1.key }) {
            let root = group[0].root
            guard var space = snapshot.spaces[group[0].id] else { continue }
            let key = "floor:\(device)"
            guard space.available < floor else {
                evictor.noteFruitless(key, nil)
                continue
            }
            let mountPoint = try await executor.run { FileSystemSpace.mountPoint(of: root) }
            let usage = { group.reduce(Int64(0)) { $0.addingReportingOverflow($1.usage.total).partialValue } }
            if !evictor.isFruitless(key, [usage(), floor]) {
                let streams = group.map { CandidateStream($0) }
                while space.available < floor, let (stream, candidate) = try await nextOldest(streams) {
                    let reason = EvictionReason.freeSpaceFloor(mountPoint: mountPoint, available: space.available, floor: floor)
                    if try await evict(candidate, in: stream.domain, for: reason) > 0 {
                        space = try await executor.run { FileSystemSpace.measure(root) } ?? space
                    }
                }
            }
            if space.available < floor {
                if !group.contains(where: \.isBusy) { evictor.noteFruitless(key, [usage(), floor]) }
                pass.notices.append(
                    "\(mountPoint) still has less free than the floor: \(ByteCount.format(space.available)) free, \(ByteCount.format(floor)) to keep free; what is left of the domains there is pinned, open or not uploaded"
                )
            }
        }
    }

    /// The least recently used candidate of several domains, taken.
    private func nextOldest(_ streams: [CandidateStream]) async throws(FileProviderError) -> (CandidateStream, EvictionCandidate)? {
        var best: (CandidateStream, EvictionCandidate)?
        for stream in streams {
            guard let candidate = try await stream.peek(executor, store) else { continue }
            if let (current, old) = best {
                let older =
                    (candidate.lastUsedAt, stream.domain.name, candidate.identifier.rawValue)
                    < (old.lastUsedAt, current.domain.name, old.identifier.rawValue)
                if !older { continue }
            }
            best = (stream, candidate)
        }
        best?.0.pop()
        return best
    }

    // MARK: One file

    /// Evicts one candidate; returns the bytes given back, at least 1 when it was evicted (an
    /// empty file too), 0 when it was left.
    private func evict(_ candidate: EvictionCandidate, in domain: EvictionDomain, for reason: EvictionReason)
        async throws(FileProviderError) -> Int64
    {
        domain.settled.insert(candidate.identifier)
        guard try await lock(domain) else { return 0 }
        let shown = "/" + candidate.path
        if domain.unfinished.contains(candidate.identifier) {
            keep(domain, shown, "its upload to the store is not finished")
            return 0
        }
        let resolved = domain.policies.resolve(candidate)
        if reason.isPressure && !resolved.policy.isEvictable {
            keep(domain, shown, "pinned (\(resolved.policy.rawValue), set on /\(resolved.setOn ?? ""))")
            return 0
        }
        let files = domain.files
        let outcome: FileEvictor.Outcome
        do {
            outcome = try await executor.run { try files.evict(candidate, for: reason) }
        } catch {
            if error.code == .cancelled { throw error }
            pass.notices.append("\(domain.name): cannot evict \(TerminalText.quoted(shown)): \(error.message)")
            logger.warning("\(domain.name): cannot evict \(TerminalText.quoted(shown)): \(error.message)")
            return 0
        }
        switch outcome {
        case .evicted(let bytes):
            if candidate.isPartial {
                domain.usage.partial = max(0, domain.usage.partial - candidate.bytes)
            } else {
                domain.usage.materialized = max(0, domain.usage.materialized - candidate.bytes)
            }
            pass.evicted.append(
                EvictedFile(
                    domain: domain.name, path: shown, bytes: bytes, partial: candidate.isPartial, kind: reason.kind,
                    reason: reason.description))
            records.append(EvictionRecord(domainID: domain.id, path: candidate.path, size: bytes, reason: reason.description))
            logger.info("\(domain.name): evicted \(TerminalText.quoted(shown)) (\(ByteCount.format(bytes))): \(reason.description)")
            return max(1, bytes)
        case .kept(let why):
            keep(domain, shown, why)
            return 0
        case .gone:
            return 0
        }
    }

    private func keep(_ domain: EvictionDomain, _ path: String, _ why: String) {
        logger.debug("\(domain.name): kept \(TerminalText.quoted(path)): \(why)")
        if pass.kept.count < Evictor.keptLimit {
            pass.kept.append(KeptFile(domain: domain.name, path: path, reason: why))
        } else {
            keptLeftOut += 1
        }
    }

    // MARK: Locks

    /// Takes a domain's sync lock (waiting with ``Evictor/waitForLocks``, else passing a busy
    /// domain over), checks that its files are where the pass looks, and reads its unfinished
    /// uploads. Returns whether the domain may be evicted from.
    private func lock(_ domain: EvictionDomain) async throws(FileProviderError) -> Bool {
        if domain.lock != nil { return true }
        if domain.isBusy { return false }
        let manager = evictor.manager
        let path = DomainLock.syncPath(home: manager.home, domain: domain.name)
        var delay: UInt64 = 10_000_000
        while true {
            let taken: DomainLock?
            do {
                taken = try await executor.run { try DomainLock.attempt(path) }
            } catch {
                if error.code == .cancelled { throw error }
                return passOver(domain, "cannot take its sync lock: \(error.message)")
            }
            if let taken {
                let (name, id, record) = (domain.name, domain.id, domain.record)
                let store = self.store
                do {
                    domain.unfinished = try await executor.run { () throws(FileProviderError) -> Set<ItemIdentifier> in
                        try manager.checkNoUnfinishedConversion(name)
                        guard let current = try store.domain(named: name), current.id == id, !ReplicaLayouts.differ(current, record) else {
                            throw FileProviderError(.providerDomainTemporarilyUnavailable, "its replica mode changed during the pass")
                        }
                        return try store.itemsWithUnfinishedOperations(domainID: id)
                    }
                } catch {
                    if error.code == .cancelled { throw error }
                    return passOver(domain, error.message)
                }
                domain.lock = taken
                return true
            }
            if !evictor.waitForLocks {
                return passOver(domain, "its sync is running; the next pass evicts")
            }
            do {
                try await Task.sleep(nanoseconds: delay)
            } catch {
                throw FileProviderError(.cancelled, "stopped waiting for the sync of \(domain.name) to finish")
            }
            delay = min(delay * 2, 100_000_000)
        }
    }

    private func passOver(_ domain: EvictionDomain, _ why: String) -> Bool {
        domain.isBusy = true
        pass.notices.append("\(domain.name): passed over: \(why)")
        return false
    }

    func releaseLocks() {
        for domain in domains { domain.lock = nil }
    }

    /// The report, with each domain's use measured again.
    func finish() async throws(FileProviderError) -> EvictionPass {
        if keptLeftOut > 0 { pass.notices.append("\(keptLeftOut) more files were left (not listed)") }
        let store = self.store
        let ids = domains.map(\.id)
        let usage = try await executor.run { () throws(FileProviderError) -> [Int64: CacheUsage] in
            var usage: [Int64: CacheUsage] = [:]
            for id in ids { usage[id] = try store.cacheUsage(domainID: id) }
            return usage
        }
        pass.domains = domains.map { domain in
            let used = usage[domain.id] ?? domain.usage
            return DomainCacheState(
                domain: domain.name, used: used.total, materialized: used.materialized, partial: used.partial,
                budget: domain.record.cacheBudget)
        }
        return pass
    }
}

extension PolicyResolver {
    /// The policy of a candidate's file (its own, which the candidate brings, else its
    /// nearest folder's), and where it is set.
    func resolve(_ candidate: EvictionCandidate) -> (policy: ContentPolicy, setOn: String?) {
        resolve(candidate.path, own: candidate.contentPolicy)
    }
}
