import Foundation
import ProviderCore
import ProviderEngine

/// Which of serve's domains are syncing now and how each one's last sync in this process ended:
/// what the D-Bus interface reports as a domain's state (``DomainSyncState``). The server
/// records; a listener hears of every change (``listen(_:)``).
public final class SyncActivity: Sendable {
    /// How a sync ended.
    public struct Outcome: Sendable, Hashable {
        /// The error that ended the sync; `nil` when it finished.
        public var code: FileProviderError.Code?
        /// What to show: the error's message, or what a partial sync left undone.
        public var message: String?
        /// The sync finished but left items undone (skipped, or refused by the store).
        public var partial: Bool

        public init(code: FileProviderError.Code? = nil, message: String? = nil, partial: Bool = false) {
            self.code = code
            self.message = message
            self.partial = partial
        }
    }

    private struct State {
        var syncing: Set<String> = []
        var last: [String: Outcome] = [:]
        var listener: (@Sendable (String) -> Void)?
    }

    private let state = Mutex(State())

    public init() {}

    /// A sync of `domain` starts.
    public func began(_ domain: String) {
        let listener = state.withLock { state in
            state.syncing.insert(domain)
            return state.listener
        }
        listener?(domain)
    }

    /// A sync of `domain` ended with `outcome`.
    public func ended(_ domain: String, _ outcome: Outcome) {
        let listener = state.withLock { state in
            state.syncing.remove(domain)
            state.last[domain] = outcome
            return state.listener
        }
        listener?(domain)
    }

    /// `domain` was disconnected or connected again: how its last sync ended no longer says
    /// anything (a sync is due once it is connected).
    public func changed(_ domain: String) {
        let listener = state.withLock { state in
            state.last[domain] = nil
            return state.listener
        }
        listener?(domain)
    }

    /// Whether a sync of `domain` runs now.
    public func isSyncing(_ domain: String) -> Bool { state.withLock { $0.syncing.contains(domain) } }

    /// How the last sync of `domain` in this process ended; `nil` before the first one ended.
    public func lastOutcome(of domain: String) -> Outcome? { state.withLock { $0.last[domain] } }

    /// Calls `listener` with a domain's name after each change of it (on the thread that
    /// recorded the change: it must not block); `nil` stops.
    public func listen(_ listener: (@Sendable (String) -> Void)?) { state.withLock { $0.listener = listener } }
}
