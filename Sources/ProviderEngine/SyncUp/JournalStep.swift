import Foundation
import ProviderCore
import ProviderStore

/// The journal entry of one operation while it runs (see ``OperationJournal/run(_:handled:resolvedOnReplay:_:)``).
///
/// The operation may record its result and close its entry in one transaction with
/// ``finish(saving:)``; otherwise the entry is closed after the operation returns. Either way
/// the entry is marked done only once the database knows the result, so a process killed in
/// between replays the operation with `mayAlreadyExist` rather than losing or repeating it.
final class JournalStep {
    /// Whether an earlier attempt of this operation did not finish (a replay).
    let replay: Bool
    private let store: MetadataStore
    private let executor: BlockingExecutor
    private let entry: JournalEntry
    private let batch: JournalBatch?
    private(set) var isFinished = false
    /// Whether the store refused the operation (``send(_:)``): nothing was done.
    private(set) var wasRefused = false

    init(store: MetadataStore, executor: BlockingExecutor, entry: JournalEntry, replay: Bool, batch: JournalBatch?) {
        self.store = store
        self.executor = executor
        self.entry = entry
        self.replay = replay
        self.batch = batch
    }

    /// Makes the operation's call to the store. A refusal (``FileProviderError/Code/isRefusal``)
    /// is noted: an operation the store refused did nothing, so its entry does not make the
    /// next attempt a replay (unless an earlier attempt's outcome is unknown).
    /// - Throws: what `call` throws.
    func send<T>(_ call: () async throws -> T) async throws(FileProviderError) -> T {
        do {
            return try await call()
        } catch {
            let error = FileProviderError.wrap(error)
            if error.code.isRefusal { wasRefused = true }
            throw error
        }
    }

    /// Closes the entry that ``OperationJournal/run(_:handled:resolvedOnReplay:_:)`` left
    /// open for the caller (a replay ended with an error whose code it resolves itself), once
    /// the caller knows whether the earlier attempt did the work; nothing when the entry is
    /// closed already.
    /// - Throws: `localIOFailure` when the database cannot be written; the entry stays open, so
    ///   the next attempt is a replay again.
    func close() async throws(FileProviderError) {
        guard !isFinished else { return }
        var entry = entry
        entry.state = .done
        entry.lastError = nil
        let (store, done) = (store, entry)
        try await executor.runToCompletion { try store.updateJournal(done) }
        isFinished = true
    }

    /// Writes the operation's resulting item and marks the entry done, in one transaction
    /// (one database write per upload fewer). In a ``JournalBatch`` that transaction may hold
    /// the results of other operations too (see ``JournalBatch/finish(_:saving:)``).
    /// Written on the executor, to its end even when the task is cancelled meanwhile.
    /// - Throws: `localIOFailure` when the database cannot be written; the entry stays open.
    func finish(saving record: ItemRecord) async throws(FileProviderError) {
        if let batch {
            await batch.finish(entry, saving: record)
        } else {
            let (store, entry) = (store, entry)
            try await executor.runToCompletion { try store.save(record, finishing: entry) }
        }
        isFinished = true
    }
}

/// What the journal keys an operation by and what it notes about it.
struct JournalKey: Sendable {
    var operation: String
    var key: String
    var payload: [String: String]

    /// The template identifier of the operation's entry: an unfinished entry with the same one
    /// makes the next attempt a replay.
    var template: String { "\(operation):\(key)" }

    static func create(path: String, kind: ItemKind) -> JournalKey {
        JournalKey(operation: "create", key: path, payload: ["path": path, "kind": kind.rawValue])
    }

    static func modify(_ record: ItemRecord) -> JournalKey {
        JournalKey(operation: "modify", key: record.identifier.rawValue, payload: ["path": record.path])
    }

    static func move(_ record: ItemRecord, to path: String) -> JournalKey {
        JournalKey(operation: "move", key: record.identifier.rawValue, payload: ["from": record.path, "to": path])
    }

    static func delete(_ record: ItemRecord) -> JournalKey {
        JournalKey(operation: "delete", key: record.identifier.rawValue, payload: ["path": record.path])
    }

    /// A new entry for the operation, not yet written.
    func entry(domainID: Int64) -> JournalEntry {
        JournalEntry(domainID: domainID, templateIdentifier: template, operation: operation, payload: payloadJSON)
    }

    /// The payload as a JSON object, keys sorted.
    var payloadJSON: String { JSONText.object(payload) }
}

/// The journal entries of operations sent together (see `SyncUp.sendTogether`):
/// opened ahead, up to ``size`` in one transaction, and finished by group commit: a result is
/// written at once unless a write is under way, and the results that arrive meanwhile go
/// together in the next write. A sync of 10,000 new files writes the database a few hundred
/// to a few thousand times instead of 20,000 times.
///
/// Safe as the single entries are: an entry is `running` before its operation starts and done
/// only in the transaction that records the result, so a process killed with results not yet
/// written replays those operations with `mayAlreadyExist`. Results are never held back to fill
/// a batch: what a kill can leave unrecorded is what one write takes (a replay of an edit whose
/// file changed again since cannot tell its own upload from someone else's and keeps both).
final class JournalBatch: Sendable {
    /// The batch of the operations the current task belongs to, if any.
    @TaskLocal static var current: JournalBatch?

    /// How many entries are opened in one transaction.
    static let size = 32

    private struct State {
        var opened: [String: (entry: JournalEntry, replay: Bool)] = [:]
        /// The records of the folders the operations go into, read when their entries opened.
        var folders: [String: ItemRecord?] = [:]
        var finished: [(entry: JournalEntry, record: ItemRecord)] = []
        /// The paths whose results were handed to ``finish(_:saving:)``: ``afterWrite`` sees
        /// them once written.
        var recorded: Set<String> = []
        var isWriting = false
        var failure: FileProviderError?

        /// The queued results, leaving none queued.
        mutating func takeFinished() -> [(entry: JournalEntry, record: ItemRecord)] {
            defer { finished = [] }
            return finished
        }
    }

    private let store: MetadataStore
    private let executor: BlockingExecutor
    private let state = Mutex(State())
    /// Called with the records of each write once it is committed, in the same job on the
    /// executor (blocking); not called for a write that failed.
    private let afterWrite: (@Sendable ([ItemRecord]) -> Void)?

    init(store: MetadataStore, executor: BlockingExecutor, afterWrite: (@Sendable ([ItemRecord]) -> Void)? = nil) {
        self.store = store
        self.executor = executor
        self.afterWrite = afterWrite
    }

    /// Opens the entries of operations about to run, in one transaction, and reads the records
    /// of the folders at `folders` (where new items go), in one job on the executor.
    /// - Throws: `localIOFailure` when the database cannot be written; `cancelled` when the
    ///   task was cancelled before the job started.
    func open(_ entries: [JournalEntry], folders: Set<String> = [], domainID: Int64 = 0) async throws(FileProviderError) {
        let store = store
        let known = state.withLock { state in Set(state.folders.keys) }
        let (opened, read) = try await executor.run {
            let opened = try store.openJournalEntries(entries)
            var read: [String: ItemRecord?] = [:]
            for path in folders.subtracting(known) { read[path] = .some(try store.item(domainID: domainID, path: path)) }
            return (opened, read)
        }
        state.withLock { state in
            for opened in opened { state.opened[opened.entry.templateIdentifier] = opened }
            state.folders.merge(read) { _, new in new }
        }
    }

    /// The record of the folder at `path` as read by ``open(_:folders:domainID:)`` (`.some(nil)`
    /// when the database has none), or `nil` when it was not read.
    func folder(at path: String) -> ItemRecord?? {
        state.withLock { state in state.folders[path] }
    }

    /// Whether the result of the operation on the item at `path` was handed to
    /// ``finish(_:saving:)`` (written, being written, or failed to be), and so goes to
    /// ``afterWrite`` once written; answered once per result.
    func takeRecorded(_ path: String) -> Bool {
        state.withLock { state in state.recorded.remove(path) != nil }
    }

    /// The entry opened for the operation with `template`, handed out once.
    func take(_ template: String) -> (entry: JournalEntry, replay: Bool)? {
        state.withLock { state in state.opened.removeValue(forKey: template) }
    }

    /// Records an operation's result: written now, with the results queued meanwhile, unless
    /// another task is writing, which then writes this one too before it stops. A failed write
    /// is kept for ``close()`` to throw. Written on the executor, to its end even when the task
    /// is cancelled meanwhile.
    func finish(_ entry: JournalEntry, saving record: ItemRecord) async {
        var batch = state.withLock { state -> [(entry: JournalEntry, record: ItemRecord)] in
            state.finished.append((entry, record))
            state.recorded.insert(record.path)
            if state.isWriting { return [] }
            state.isWriting = true
            return state.takeFinished()
        }
        while !batch.isEmpty {
            let written = batch
            let (store, afterWrite) = (store, afterWrite)
            var failure: FileProviderError?
            do {
                failure = try await executor.runToCompletion { () -> FileProviderError? in
                    Self.write(written, to: store, afterWrite: afterWrite)
                }
            } catch {
                failure = error
            }
            if let failure { state.withLock { state in state.failure = state.failure ?? failure } }
            batch = state.withLock { state in
                if state.finished.isEmpty { state.isWriting = false }
                return state.takeFinished()
            }
        }
    }

    /// Writes the queued results and gives back the entries of operations that never ran (their
    /// task was not started after a failure).
    /// - Throws: the first failed write (`localIOFailure`): the operations whose results it held
    ///   are replayed by the next sync.
    /// In one job on the executor, run to its end even when the task is cancelled.
    func close() async throws(FileProviderError) {
        let (finished, unused) = state.withLock { state in
            defer { state.opened = [:] }
            return (state.takeFinished(), Array(state.opened.values))
        }
        let (store, afterWrite) = (store, afterWrite)
        var failure: FileProviderError?
        do {
            failure = try await executor.runToCompletion { () -> FileProviderError? in
                let failure = Self.write(finished, to: store, afterWrite: afterWrite)
                do {
                    try store.withdrawJournalEntries(unused)
                } catch {
                    return failure ?? FileProviderError.wrap(error)
                }
                return failure
            }
        } catch {
            failure = error
        }
        if let failure { state.withLock { state in state.failure = state.failure ?? failure } }
        if let failure = state.withLock({ $0.failure }) { throw failure }
    }

    /// Writes results in one transaction, then gives their records to `afterWrite`; returns
    /// the failure, if any. Blocking.
    private static func write(
        _ finished: [(entry: JournalEntry, record: ItemRecord)], to store: MetadataStore,
        afterWrite: (@Sendable ([ItemRecord]) -> Void)?
    ) -> FileProviderError? {
        if finished.isEmpty { return nil }
        do {
            let records = finished.map(\.record)
            try store.save(records, finishing: finished.map(\.entry))
            afterWrite?(records)
            return nil
        } catch {
            return FileProviderError.wrap(error)
        }
    }
}
