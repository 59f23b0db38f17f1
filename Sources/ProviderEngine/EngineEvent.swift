/// Progress and notices from long engine work, for a CLI to draw or a log to record.
public enum EngineEvent: Sendable {
    /// Sync down is listing the store: folders listed and items seen so far.
    case listing(folders: Int, items: Int)
    /// Transfers of a batch: bytes and items done out of the totals.
    case transfer(completedBytes: Int64, totalBytes: Int64, completedItems: Int, totalItems: Int)
    /// Something was skipped or kept, and why; the rest of the work goes on.
    case notice(path: String, message: String)
    /// Another sync of the domain is running (in `process`, when known; `serving` when that
    /// process is the domain's `serve`): this sync waits for it to finish. Sent once per sync.
    case waitingForSync(process: Int32?, serving: Bool)
}

/// Receives engine events; called from many tasks at once.
public typealias EventHandler = @Sendable (EngineEvent) -> Void

/// The outcome of one item in a batch (materialize, evict, pin).
public struct ItemOutcome: Sendable {
    /// The item's `DOMAIN:/path`.
    public var path: String
    /// `nil` when it worked.
    public var error: FileProviderError?

    public init(path: String, error: FileProviderError?) {
        self.path = path
        self.error = error
    }
}

import ProviderCore
