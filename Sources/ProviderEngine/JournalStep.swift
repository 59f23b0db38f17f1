import Foundation
import ProviderCore
import ProviderStore

/// The journal entry of one operation while it runs (see `DomainController.journalled`).
///
/// The operation may record its result and close its entry in one transaction with
/// ``finish(saving:)``; otherwise the entry is closed after the operation returns. Either way
/// the entry is marked done only once the database knows the result, so a process killed in
/// between replays the operation with `mayAlreadyExist` rather than losing or repeating it.
final class JournalStep {
    /// Whether an earlier attempt of this operation did not finish (a replay).
    let replay: Bool
    private let store: MetadataStore
    private let entry: JournalEntry
    private(set) var isFinished = false

    init(store: MetadataStore, entry: JournalEntry, replay: Bool) {
        self.store = store
        self.entry = entry
        self.replay = replay
    }

    /// Writes the operation's resulting item and marks the entry done, in one transaction
    /// (one database write per upload fewer).
    /// - Throws: `localIOFailure` when the database cannot be written; the entry stays open.
    func finish(saving record: ItemRecord) throws(FileProviderError) {
        try store.save(record, finishing: entry)
        isFinished = true
    }
}
