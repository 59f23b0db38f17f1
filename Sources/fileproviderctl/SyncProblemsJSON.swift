import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

/// What a domain's sync left undone, as `status --json` (and every domain object) prints it:
/// from the database, counted by SQL, with at most ``exampleLimit`` examples.
struct SyncProblemsJSON: Encodable {
    /// The most problems of the last sync printed with their paths and reasons.
    static let exampleLimit = SyncReport.problemLimit

    /// When the last sync that finished did (left out when none finished since the database
    /// began to record this).
    var lastSyncFinishedAt: Date?
    /// Items of the store the last finished sync skipped.
    var skipped: Int
    /// Local changes the last finished sync did not send.
    var notSent: Int
    /// Its first problems, in the order they came: `kind` (`skipped` or `notSent`), `path`
    /// (starting with `/`), `reason`.
    var latest: [SyncProblem]
    /// Local changes the store refused at their last attempt (the journal's failed operations;
    /// the next sync sends them again).
    var refusedChanges: Int
    /// Local changes interrupted or waiting in the journal (replayed by the next sync).
    var unfinishedChanges: Int
    /// Local items excluded from sync (the store cannot take them).
    var excludedItems: Int

    /// - Throws: `localIOFailure` when the database fails.
    init(domainID: Int64, store: MetadataStore, limit: Int = exampleLimit) throws(FileProviderError) {
        let last = try store.lastSyncOutcome(domainID: domainID, limit: limit)
        lastSyncFinishedAt = last?.outcome.at
        skipped = last?.outcome.skipped ?? 0
        notSent = last?.outcome.notSent ?? 0
        latest = (last?.problems ?? []).map {
            SyncProblem(kind: SyncProblem.Kind(rawValue: $0.kind) ?? .skipped, path: $0.path, reason: $0.reason)
        }
        let operations = try store.unfinishedOperationCount(domainID: domainID)
        refusedChanges = operations.failed
        unfinishedChanges = operations.unfinished
        excludedItems = try store.excludedItems(domainID: domainID, limit: 0).count
    }

    /// `3 items skipped, 1 change not sent`, or `nil` when the last sync left nothing undone.
    var summary: String? { SyncReport.problemSummary(skipped: skipped, notSent: notSent) }
}
