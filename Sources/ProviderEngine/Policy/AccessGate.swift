import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

/// Access rules by program at run time: the one call every on-access layout makes before it
/// fetches anything for a program (``decide(pid:domainID:path:present:)``), and the record of
/// what the rules refused (the log, `why`, `status`).
///
/// The rules are read from the database at the first request and again when they are more
/// than ``reloadInterval`` old, so `fileproviderctl rules add|remove` takes effect in a running
/// `serve` within about a second. A process's identity (``ProcessIdentity``) is read from
/// `/proc` once and kept for ``identityLifetime`` (a program reading a file in many chunks
/// asks many times); without a rule that limits anything, no identity is read at all.
///
/// Refusals are logged (the first of each process in each domain at `notice`, naming the
/// program, its executable and the rule; later ones at `debug`) and written to the database
/// (`accessRefusal`) off the caller's thread, coalesced: a write runs while refusals wait, and
/// the refusals that come meanwhile go in the next one.
///
/// Blocking (reads `/proc`, and the database when the rules are reloaded): call it from an
/// on-access thread of its own (the fanotify event thread, a FUSE request thread), never from
/// Swift's cooperative pool. Any thread.
public final class AccessGate: Sendable {
    /// Seconds after which the rules are read again.
    public static let reloadInterval: Double = 1
    /// Seconds a process's identity is kept (a pid is not reused that fast).
    public static let identityLifetime: Double = 2

    private struct State {
        var rules: AccessRules?
        var loadedAt: Double = 0
        var identities: [Int32: (identity: ProcessIdentity, at: Double)] = [:]
        /// The processes whose first refusal in a domain was logged, by pid and domain.
        var logged: Set<[Int64]> = []
        var pending: [AccessRefusalRecord] = []
        var writing = false
    }

    private let store: MetadataStore
    private let executor: BlockingExecutor
    private let logger: Logger
    private let now: @Sendable () -> Double
    private let state = Mutex(State())

    init(store: MetadataStore, executor: BlockingExecutor, logger: Logger) {
        self.store = store
        self.executor = executor
        self.logger = logger
        self.now = { ProcessInfo.processInfo.systemUptime }
    }

    /// The gate of a manager's domains (its database, executor and log).
    public convenience init(manager: ProviderManager) {
        self.init(store: manager.store, executor: manager.executor, logger: manager.logger)
    }

    /// What the request of the process `pid` for the file at `path` (relative) of the domain
    /// `domainID` does, given whether the bytes it needs are present (an open needs none).
    /// A refusal is logged and recorded before this returns; the caller fails the request with
    /// ``AccessDecision/errno`` and fetches nothing. Blocking (see the type).
    public func decide(pid: Int32, domainID: Int64, domain: String, path: String, present: Bool) -> AccessDecision {
        let rules = currentRules()
        guard rules.limitsAnything else {
            return AccessDecision(
                action: .fetch, rule: nil, program: ProcessIdentity(pid: pid, executable: nil, command: nil, unit: nil, cgroup: nil),
                present: present)
        }
        let decision = rules.decision(for: identity(pid), domainID: domainID, present: present)
        if decision.refuses { refused(decision, domainID: domainID, domain: domain, path: path) }
        return decision
    }

    /// Whether some rule may limit the process `pid` in some domain: when not, a layout may
    /// let a request of present bytes go on without finding out its domain. A process that
    /// cannot be told (gone already: a notification read after it exited) may be limited.
    /// Blocking.
    public func mayLimit(pid: Int32) -> Bool {
        let rules = currentRules()
        guard rules.limitsAnything else { return false }
        let program = identity(pid)
        guard program.isKnown else { return true }
        return rules.rules.contains { $0.action != .fetch && AccessRules.matches($0, program) }
    }

    /// Writes the refusals not written yet. For `serve`'s end and tests.
    public func flush() async {
        await write()
    }

    // MARK: Internals

    private func currentRules() -> AccessRules {
        let time = now()
        if let rules = state.withLock({ $0.rules != nil && time - $0.loadedAt < Self.reloadInterval ? $0.rules : nil }) {
            return rules
        }
        do {
            let rules = AccessRules(try store.accessRules())
            state.withLock {
                $0.rules = rules
                $0.loadedAt = time
            }
            return rules
        } catch {
            // Keep the rules read last (none before the first read: every program fetches),
            // and try again at the next request after the interval.
            logger.warning("access rules: cannot read them: \(error.message)")
            return state.withLock {
                $0.loadedAt = time
                return $0.rules ?? AccessRules([])
            }
        }
    }

    private func identity(_ pid: Int32) -> ProcessIdentity {
        let time = now()
        if let known = state.withLock({ $0.identities[pid] }), time - known.at < Self.identityLifetime { return known.identity }
        let identity = ProcessIdentity.of(pid: pid)
        state.withLock { state in
            if state.identities.count > 4096 { state.identities = state.identities.filter { time - $0.value.at < Self.identityLifetime } }
            state.identities[pid] = (identity, time)
        }
        return identity
    }

    private func refused(_ decision: AccessDecision, domainID: Int64, domain: String, path: String) {
        let program = decision.program
        let rule = decision.rule.map { AccessDecision.describe($0, domain: domain) } ?? decision.ruleDescription
        let refusal = AccessRefusalRecord(
            domainID: domainID, path: path, program: program.programName, executable: program.executable, unit: program.unit,
            pid: program.pid, rule: rule)
        let (first, start) = state.withLock { state -> (Bool, Bool) in
            if state.logged.count > 4096 { state.logged.removeAll() }
            let first = state.logged.insert([Int64(program.pid), domainID]).inserted
            state.pending.append(refusal)
            defer { state.writing = true }
            return (first, !state.writing)
        }
        let what = decision.action == .deny ? "denied" : "refused (missing bytes, present-only)"
        let message =
            "\(domain): \(TerminalText.quoted("/" + path)): \(what) to \(program) by rule \(rule); nothing fetched"
        if first {
            logger.notice("\(message) (later refusals of this process are counted in 'fileproviderctl status')")
        } else {
            logger.debug("\(message)")
        }
        if start { Task.detached { [self] in await write() } }
    }

    /// Writes the waiting refusals, then those that came meanwhile, until none wait.
    private func write() async {
        while true {
            let batch = state.withLock { state -> [AccessRefusalRecord] in
                let batch = state.pending
                state.pending = []
                state.writing = !batch.isEmpty
                return batch
            }
            if batch.isEmpty { return }
            // One row per file: the last refusal, with the count of the batch's.
            var rows: [String: AccessRefusalRecord] = [:]
            for refusal in batch {
                let key = "\(refusal.domainID)/\(refusal.path)"
                var row = refusal
                row.count = (rows[key]?.count ?? 0) + refusal.count
                rows[key] = row
            }
            let store = self.store
            let records = Array(rows.values)
            do {
                try await executor.run { try store.recordAccessRefusals(records) }
            } catch {
                logger.warning("access rules: cannot record \(batch.count) refusals: \(error.message)")
            }
        }
    }
}
