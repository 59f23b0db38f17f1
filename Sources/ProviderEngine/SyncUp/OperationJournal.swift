import Foundation
import ProviderCore
import ProviderStore

/// The operation journal of one domain as sync up writes it: every operation on the store is
/// written to the journal before it runs, keyed by its template identifier (``JournalKey``), and
/// closed once the database knows its result, so a process killed in between replays it with
/// `mayAlreadyExist` (see `Docs/Sync.md`). Operations sent together share a ``JournalBatch``.
struct OperationJournal: Sendable {
    let context: DomainContext

    /// Runs `body` as a journalled operation. An error whose code is in `handled` is resolved by
    /// the caller (a conflict kept both versions, the item was already gone), so its entry is
    /// closed: a stale unfinished entry would turn a later, unrelated operation with the same
    /// key into a replay.
    ///
    /// Except on a replay, for a code in `resolvedOnReplay`: there the caller first tells the
    /// earlier attempt's own work from someone else's change (the store already holds the
    /// edit's bytes, the item already stands at its new place), which takes a download or a
    /// listing. The entry stays open (`pending`) until the caller closes it with what it found
    /// (``JournalStep/finish(saving:)`` or ``JournalStep/close()``): a process killed meanwhile
    /// replays again, where a closed entry would make the next attempt take its own upload for
    /// a conflict (a conflicted copy) or its own move for a deletion in the store (a duplicate).
    ///
    /// The entry comes from the task's ``JournalBatch`` when it opened one for `key`, else it is
    /// opened here.
    /// - Throws: what `body` throws (as a `FileProviderError`); `localIOFailure` when the entry
    ///   cannot be opened or closed.
    func run<T>(
        _ key: JournalKey, handled: Set<FileProviderError.Code> = [], resolvedOnReplay: Set<FileProviderError.Code> = [],
        _ body: (JournalStep) async throws -> T
    ) async throws(FileProviderError) -> T {
        let (store, executor) = (context.store, context.executor)
        let batch = JournalBatch.current
        var (entry, replay): (JournalEntry, Bool)
        if let opened = batch?.take(key.template) {
            (entry, replay) = opened
        } else {
            // One entry in, one out; on the executor (SQLite blocks).
            let new = key.entry(domainID: context.domainID)
            (entry, replay) = try await executor.run { try store.openJournalEntries([new])[0] }
        }
        let step = JournalStep(store: store, executor: executor, entry: entry, replay: replay, batch: batch)
        do {
            let value = try await body(step)
            if !step.isFinished {
                entry.state = .done
                entry.lastError = nil
                let done = entry
                try await executor.runToCompletion { try store.updateJournal(done) }
            }
            return value
        } catch {
            let error = FileProviderError.wrap(error)
            // Closed with its result already: nothing to undo.
            if step.isFinished { throw error }
            // Refused by the store on a first attempt: nothing was done, and the next attempt is
            // sent afresh (`failed`). Anything else may have reached the store (`pending`): the
            // next attempt is a replay. A replay that the store refuses stays a replay: the
            // attempt before it may still have reached the store. A replay's entry for a code in
            // `resolvedOnReplay` stays open for its caller to close.
            let resolved = handled.contains(error.code) && !(step.replay && resolvedOnReplay.contains(error.code))
            entry.state = resolved ? .done : step.wasRefused && !step.replay ? .failed : .pending
            entry.lastError = error.message
            let closed = entry
            _ = try? await executor.runToCompletion { try store.updateJournal(closed) }
            throw error
        }
    }

    /// Marks every unfinished journal entry done (used when the replica has no local changes),
    /// in one job on the executor.
    /// - Throws: `localIOFailure` when the database fails; `cancelled` when the task was
    ///   cancelled before the job started.
    func closeStaleEntries() async throws(FileProviderError) {
        let (store, domainID) = (context.store, context.domainID)
        try await context.executor.run {
            for var entry in try store.unfinishedOperations(domainID: domainID) {
                entry.state = .done
                entry.lastError = "superseded: the replica had no local change left for it"
                try store.updateJournal(entry)
            }
            try store.pruneJournal(domainID: domainID)
        }
    }

    /// Removes the entries that are done, on the executor; a failure is left for the next prune.
    func prune() async {
        let (store, domainID) = (context.store, context.domainID)
        _ = try? await context.executor.run { try store.pruneJournal(domainID: domainID) }
    }

    /// A batch for operations sent together (``JournalBatch``), writing `gathered` creations'
    /// results at a time; `afterWrite` gets the records of each of its writes once committed,
    /// on the executor.
    func makeBatch(gathered: Int = 1, afterWrite: (@Sendable ([ItemRecord]) -> Void)? = nil) -> JournalBatch {
        let context = context
        return JournalBatch(
            store: context.store, executor: context.executor, gathered: gathered,
            refusal: { new, holder in Uploader.identifierTaken(new.path, by: holder.path, context: context) },
            afterWrite: afterWrite)
    }
}
