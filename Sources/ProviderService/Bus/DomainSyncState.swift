import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

/// A served domain's state in Apple's and Windows' words, as the D-Bus interface gives it (a
/// tray icon's states): `in-sync`, `syncing`, `paused`, `offline`, `error`.
public enum DomainSyncState: String, Sendable, Codable, CaseIterable {
    /// Nothing to do: the last sync finished with every item done.
    case inSync = "in-sync"
    /// A sync runs now (or serve has not finished its first one).
    case syncing
    /// The domain is disconnected (`fileproviderctl domain disconnect`): nothing is synced.
    case paused
    /// The store cannot be reached (`serverUnreachable`): the domain backs off and retries.
    case offline
    /// The last sync failed otherwise (credentials refused, store full, ...) or left items
    /// undone; ``DomainStateReport/detail`` says what.
    case error

    /// The state of `record` from what serve knows (`activity`) and the database; with a
    /// sentence for the states that need one.
    static func of(_ record: DomainRecord, activity: SyncActivity) -> (state: DomainSyncState, detail: String?) {
        let name = record.name
        if !record.isConnected {
            return (.paused, "disconnected: nothing is synced until 'fileproviderctl domain connect \(name)'")
        }
        if activity.isSyncing(name) { return (.syncing, nil) }
        if let last = activity.lastOutcome(of: name) {
            if let code = last.code {
                return (code == .serverUnreachable ? .offline : .error, last.message)
            }
            return last.partial ? (.error, last.message) : (.inSync, nil)
        }
        // No sync of this serve has ended yet: the first one is due or running.
        if let backoff = DomainBackoff(record) { return (.error, backoff.error) }
        return (.syncing, nil)
    }
}
