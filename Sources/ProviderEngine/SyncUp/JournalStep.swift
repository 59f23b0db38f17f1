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
    /// Whether the operation's result goes to a ``JournalBatch``, which checks a new item's
    /// identifier in the write that records it (``finish(saving:isNew:)``).
    var isBatched: Bool { batch != nil }
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
    /// the results of other operations too (see ``JournalBatch/finish(_:saving:isNew:)``), and
    /// a new item (`isNew`) whose identifier another item holds is refused there.
    /// Written on the executor, to its end even when the task is cancelled meanwhile.
    /// - Throws: `localIOFailure` when the database cannot be written; the entry stays open.
    func finish(saving record: ItemRecord, isNew: Bool = false) async throws(FileProviderError) {
        if let batch {
            await batch.finish(entry, saving: record, isNew: isNew)
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
/// opened ahead, up to ``size`` in one transaction, and finished by group commit. A creation's
/// result waits until ``gathered`` results are queued (or the batch closes); any other result
/// is written at once unless a write is under way, with the results queued meanwhile; the
/// results that arrive during a write go together in the next one. A sync of 10,000 new files
/// writes the database 10,000 / ``gathered`` times instead of about once per file.
///
/// Safe as the single entries are: an entry is `running` before its operation starts and done
/// only in the transaction that records the result, so a process killed with results not yet
/// written replays those operations with `mayAlreadyExist`. Only creations wait: a replayed
/// creation sends the file as it is then and takes the store's item at its name (the built-in
/// backends replace a file whose bytes differ), so it ends as the first attempt would have, whatever
/// changed since. Edits, moves and deletions are never held back: a replay of an edit whose
/// file changed again since cannot tell its own upload from someone else's and keeps both.
///
/// A new item's identifier is checked in the transaction that writes it (``JournalStep/finish(saving:isNew:)``):
/// one the database gives another item is refused there, its entry left open (``refused()``).
final class JournalBatch: Sendable {
    /// The batch of the operations the current task belongs to, if any.
    @TaskLocal static var current: JournalBatch?

    /// How many entries are opened in one transaction.
    static let size = 32

    /// How many creations' results ``SyncUp``'s batches write together (more when more uploads
    /// run at once): 16 took 22% less CPU than 4 (the upload depth over SFTP) for 10,000 new
    /// files, and 64 8% less than 16 (over WebDAV, 8 uploads at once), a transaction's WAL pages
    /// shared by more files. What a kill can leave unrecorded grows with it, and only by
    /// creations, whose replays end as their first attempts would have.
    static let creationsPerWrite = 64

    private struct Finished: Sendable {
        var entry: JournalEntry
        var record: ItemRecord
        var isNew: Bool
    }

    private struct State {
        var opened: [String: (entry: JournalEntry, replay: Bool)] = [:]
        /// The records of the folders the operations go into, read when their entries opened.
        var folders: [String: ItemRecord?] = [:]
        var finished: [Finished] = []
        /// The paths whose results were handed to ``finish(_:saving:isNew:)``: ``afterWrite``
        /// sees them once written.
        var recorded: Set<String> = []
        /// New items a write did not record: another item holds their identifier.
        var refused: [(path: String, error: FileProviderError)] = []
        var isWriting = false
        var failure: FileProviderError?

        /// The queued results, leaving none queued.
        mutating func takeFinished() -> [Finished] {
            defer { finished = [] }
            return finished
        }

        /// The queued results when they are due: `gathered` of them, or any result that is
        /// not a creation's; none otherwise.
        mutating func takeDue(gathered: Int) -> [Finished] {
            let due = finished.count >= gathered || finished.contains { $0.entry.operation != "create" }
            return due ? takeFinished() : []
        }
    }

    private let store: MetadataStore
    private let executor: BlockingExecutor
    /// How many creations' results are written together.
    let gathered: Int
    private let state = Mutex(State())
    /// Called with the records of each write once it is committed, in the same job on the
    /// executor (blocking); not called for a write that failed.
    private let afterWrite: (@Sendable ([ItemRecord]) -> Void)?
    /// The message of a new item refused because `holder` has its identifier.
    private let refusal: @Sendable (_ new: ItemRecord, _ holder: ItemRecord) -> String

    init(
        store: MetadataStore, executor: BlockingExecutor, gathered: Int = 1,
        refusal: @escaping @Sendable (ItemRecord, ItemRecord) -> String = { new, holder in
            "the store answered the creation of \(new.path) with the identifier of \(holder.path)"
        },
        afterWrite: (@Sendable ([ItemRecord]) -> Void)? = nil
    ) {
        self.store = store
        self.executor = executor
        self.gathered = max(1, gathered)
        self.refusal = refusal
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
    /// ``finish(_:saving:isNew:)`` (written, being written, or failed to be), and so goes to
    /// ``afterWrite`` once written; answered once per result.
    func takeRecorded(_ path: String) -> Bool {
        state.withLock { state in state.recorded.remove(path) != nil }
    }

    /// The entry opened for the operation with `template`, handed out once.
    func take(_ template: String) -> (entry: JournalEntry, replay: Bool)? {
        state.withLock { state in state.opened.removeValue(forKey: template) }
    }

    /// Records an operation's result: queued, and written now with the results queued
    /// meanwhile when they are due (``gathered`` creations' results, or another's) unless
    /// another task is writing, which then writes them before it stops. A new item (`isNew`)
    /// is checked in the write (``refused()``). A failed write is kept for ``close()`` to
    /// throw. Written on the executor, to its end even when the task is cancelled meanwhile.
    func finish(_ entry: JournalEntry, saving record: ItemRecord, isNew: Bool = false) async {
        let gathered = gathered
        var batch = state.withLock { state -> [Finished] in
            state.finished.append(Finished(entry: entry, record: record, isNew: isNew))
            state.recorded.insert(record.path)
            if state.isWriting { return [] }
            let due = state.takeDue(gathered: gathered)
            if !due.isEmpty { state.isWriting = true }
            return due
        }
        while !batch.isEmpty {
            await write(batch)
            batch = state.withLock { state in
                let due = state.takeDue(gathered: gathered)
                if due.isEmpty { state.isWriting = false }
                return due
            }
        }
    }

    /// The new items whose results were not recorded because another item holds their
    /// identifier, each with the error saying so (`corruptData`); their entries stay open.
    /// Complete once ``close()`` returned.
    func refused() -> [(path: String, error: FileProviderError)] {
        state.withLock { state in state.refused }
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
        let store = store
        let failure: FileProviderError? = await write(finished) {
            do {
                try store.withdrawJournalEntries(unused)
                return nil
            } catch {
                return FileProviderError.wrap(error)
            }
        }
        if let failure { state.withLock { state in state.failure = state.failure ?? failure } }
        if let failure = state.withLock({ $0.failure }) { throw failure }
    }

    /// Writes results in one transaction on the executor, run to its end even when the task is
    /// cancelled, then gives their records to `afterWrite` and notes the refused ones; a failure
    /// is kept for ``close()``. `then` runs in the same job afterwards; returns its failure.
    @discardableResult
    private func write(
        _ finished: [Finished], then: @escaping @Sendable () -> FileProviderError? = { nil }
    ) async -> FileProviderError? {
        let (store, afterWrite, refusal) = (store, afterWrite, refusal)
        var outcome = Written()
        do {
            outcome = try await executor.runToCompletion { () -> Written in
                var outcome = Self.write(finished, to: store, afterWrite: afterWrite, refusal: refusal)
                outcome.after = then()
                return outcome
            }
        } catch {
            outcome.failure = error
        }
        let written = outcome
        state.withLock { state in
            state.refused += written.refused
            if let failure = written.failure { state.failure = state.failure ?? failure }
        }
        return written.after
    }

    /// What one write did: its failure, the new items it refused, the failure of what ran after.
    private struct Written: Sendable {
        var failure: FileProviderError?
        var refused: [(path: String, error: FileProviderError)] = []
        var after: FileProviderError?
    }

    /// Writes results in one transaction, then gives the records written to `afterWrite`.
    /// Blocking.
    private static func write(
        _ finished: [Finished], to store: MetadataStore, afterWrite: (@Sendable ([ItemRecord]) -> Void)?,
        refusal: @Sendable (ItemRecord, ItemRecord) -> String
    ) -> Written {
        if finished.isEmpty { return Written() }
        do {
            let records = finished.map(\.record)
            let refused = try store.save(
                records, finishing: finished.map(\.entry), checkingNew: finished.map(\.isNew), refusal: refusal)
            if refused.isEmpty {
                afterWrite?(records)
                return Written()
            }
            let paths = Set(refused.map(\.record.path))
            afterWrite?(records.filter { !paths.contains($0.path) })
            return Written(
                refused: refused.map { ($0.record.path, FileProviderError(.corruptData, refusal($0.record, $0.holder))) })
        } catch {
            return Written(failure: FileProviderError.wrap(error))
        }
    }
}
