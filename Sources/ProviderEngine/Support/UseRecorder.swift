import Foundation
import Logging
import ProviderCore
import ProviderStore

/// Records when programs use files (an on-access event, a local open, a download), for
/// least-recently-used eviction (table `itemUse`). Calls never block: uses are collected in
/// memory and written in one transaction about once a second (``interval``) through the
/// engine's executor, and by ``flush()``; sooner once ``earlyWriteCount`` uses are waiting (a
/// `materialize` of thousands of files writes them while its downloads go on, not all at its
/// end). A use recorded twice before a flush is written once, with the later date.
///
/// Losing the last second of uses in a crash only makes those files look older to eviction;
/// nothing else depends on them.
public final class UseRecorder: Sendable {
    /// Seconds between writes.
    public let interval: Double
    private let store: MetadataStore
    private let executor: BlockingExecutor
    private let logger: Logger
    private let pending = Mutex<Pending>(Pending())

    private struct Pending {
        /// Uses by domain and identifier.
        var byIdentifier: [Int64: [ItemIdentifier: Date]] = [:]
        /// Uses by domain and path (relative to the replica root), resolved when written.
        var byPath: [Int64: [String: Date]] = [:]
        /// A write is scheduled.
        var scheduled = false
        /// How many uses are held (distinct items and paths).
        var count = 0
        /// A write started because ``UseRecorder/earlyWriteCount`` uses were held, while it runs.
        var early: Task<Void, Never>?
        /// The last write started: each write waits for the one before it, so once it is done
        /// every use taken before it is in the database.
        var lastWrite: Task<Void, Never>?
        var isEmpty: Bool { byIdentifier.isEmpty && byPath.isEmpty }
    }

    init(store: MetadataStore, executor: BlockingExecutor, logger: Logger, interval: Double = 1) {
        self.store = store
        self.executor = executor
        self.logger = logger
        self.interval = max(0.01, interval)
    }

    /// Records that a program used an item's file (the on-access handler calls this when it
    /// lets a read through; a download counts too). Any thread; never blocks.
    public func used(domainID: Int64, identifier: ItemIdentifier, at date: Date = Date()) {
        schedule { pending in
            let earlier = pending.byIdentifier[domainID]?[identifier]
            if earlier == nil { pending.count += 1 }
            if earlier == nil || earlier! < date { pending.byIdentifier[domainID, default: [:]][identifier] = date }
        }
    }

    /// Records that a program opened the file at `path` (relative to the replica root, as
    /// ``ServeWatcher`` sees local opens); the item is looked up when the use is written, and a
    /// path that is no item is dropped. Any thread; never blocks.
    public func used(domainID: Int64, path: String, at date: Date = Date()) {
        schedule { pending in
            let earlier = pending.byPath[domainID]?[path]
            if earlier == nil { pending.count += 1 }
            if earlier == nil || earlier! < date { pending.byPath[domainID, default: [:]][path] = date }
        }
    }

    /// How many uses held start a write at once, without waiting for the timer.
    static let earlyWriteCount = 2_048

    /// Adds a use and starts the timer of the next write when none runs, or a write at once
    /// when ``earlyWriteCount`` uses are held and no such write runs.
    private func schedule(_ add: (inout Pending) -> Void) {
        let start = pending.withLock { pending -> Bool in
            add(&pending)
            if pending.count >= Self.earlyWriteCount, pending.early == nil {
                // Its end is recorded under the lock, so after this assignment.
                pending.early = Task.detached { [self] in
                    await write(rescheduling: false)
                    self.pending.withLock { $0.early = nil }
                }
            }
            defer { pending.scheduled = true }
            return !pending.scheduled
        }
        guard start else { return }
        let interval = self.interval
        Task.detached { [self] in
            try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
            await write(rescheduling: true)
        }
    }

    /// How many uses are held, not yet taken by a write: for tests.
    var heldCount: Int { pending.withLock { $0.count } }

    /// The early write under way (``earlyWriteCount``), if any: for tests.
    var earlyWrite: Task<Void, Never>? { pending.withLock { $0.early } }

    /// Writes every use collected so far; returns once they are in the database, with those of
    /// writes already under way (the timer's, an early one). Failures are logged (the uses are
    /// dropped: they only order evictions).
    ///
    /// A flush used to return at once when the timer's write had just taken the uses and was
    /// still writing them: eviction then chose by the older dates, and evicted the file a
    /// program had read a moment before.
    public func flush() async {
        await write(rescheduling: false)
    }

    /// Takes the uses held and writes them after the write before it; returns once written.
    private func write(rescheduling: Bool) async {
        let task = pending.withLock { pending -> Task<Void, Never> in
            let taken = Pending(byIdentifier: pending.byIdentifier, byPath: pending.byPath)
            pending.byIdentifier = [:]
            pending.byPath = [:]
            pending.count = 0
            if rescheduling { pending.scheduled = false }
            let previous = pending.lastWrite
            let task = Task.detached { [self] in
                await previous?.value
                await store(taken)
            }
            pending.lastWrite = task
            return task
        }
        await task.value
    }

    /// Writes uses taken from ``pending``.
    private func store(_ taken: Pending) async {
        guard !taken.isEmpty else { return }
        let store = self.store
        do {
            try await executor.run {
                var uses = taken.byIdentifier
                for (domainID, paths) in taken.byPath {
                    for (path, date) in paths {
                        guard let record = try store.item(domainID: domainID, path: path), record.kind == .file else { continue }
                        if let earlier = uses[domainID]?[record.identifier], earlier >= date { continue }
                        uses[domainID, default: [:]][record.identifier] = date
                    }
                }
                try store.recordUses(uses)
            }
        } catch {
            logger.warning("cannot record when files were last used: \(error.message)")
        }
    }
}
