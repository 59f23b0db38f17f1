import ProviderCore

/// Progress and notices from long engine work, for a CLI to draw or a log to record.
public enum EngineEvent: Sendable {
    /// Sync down is listing the store: folders listed and items seen so far.
    case listing(folders: Int, items: Int)
    /// Transfers of a batch: bytes and items done out of the totals. `resumedBytes` of the
    /// completed bytes were already on disk when their download resumed from a checkpoint: done,
    /// but not moved now (a rate counts `completedBytes - resumedBytes`).
    case transfer(completedBytes: Int64, totalBytes: Int64, completedItems: Int, totalItems: Int, resumedBytes: Int64)
    /// Something was skipped or kept, and why; the rest of the work goes on.
    case notice(path: String, message: String)
    /// Another sync of the domain is running (in `process`, when known; `serving` when that
    /// process is the domain's `serve`): this sync waits for it to finish. Sent once per sync.
    case waitingForSync(process: Int32?, serving: Bool)
}

/// Receives engine events; called from many tasks at once.
public typealias EventHandler = @Sendable (EngineEvent) -> Void

/// The outcome of one item in a batch (materialize, evict, pin).
/// Receives the outcomes of a command over many items as they come, a batch at a time (a page
/// of a subtree), in order, one call after another: a command over a million files need not hold
/// a million outcomes (see ``OutcomeCollector`` for the array).
public typealias OutcomeHandler = @Sendable ([ItemOutcome]) -> Void

/// Collects outcomes given to an ``OutcomeHandler`` into one array (tests, few items).
public final class OutcomeCollector: Sendable {
    private let collected = Mutex<[ItemOutcome]>([])
    public init() {}
    /// The handler that adds to ``outcomes``.
    public var handler: OutcomeHandler { { [collected] batch in collected.withLock { $0 += batch } } }
    /// The outcomes given so far, in order.
    public var outcomes: [ItemOutcome] { collected.withLock { $0 } }
}

public struct ItemOutcome: Sendable {
    /// The item's `DOMAIN:/path`, exactly as it is (JSON prints it); text prints ``message``,
    /// or the path through ``TerminalText/quoted(_:)``.
    public var path: String
    /// `nil` when it worked.
    public var error: FileProviderError?
    /// What a user should know of an item that worked (a download of another version than
    /// the store listed), naming it; `nil` when there is nothing to say.
    public var notice: String?

    public init(path: String, error: FileProviderError?, notice: String? = nil) {
        self.path = path
        self.error = error
        self.notice = notice
    }

    /// The failure in one line that names the item once, or `nil` when it worked: the error's
    /// message when it names the item already (`photos:/a.jpg is pinned; …`), else
    /// `DOMAIN:/path: message`. Print this, not the path and the message side by side.
    public var message: String? {
        guard let error else { return nil }
        let shown = TerminalText.quoted(path)
        return Self.message(error.message, names: shown) ? error.message : "\(shown): \(error.message)"
    }

    /// A notice that the item was not downloaded and why, naming it once.
    public var notDownloadedNotice: String? {
        guard let error else { return nil }
        let shown = TerminalText.quoted(path)
        return Self.message(error.message, names: shown) ? "not downloaded: \(error.message)" : "\(shown): not downloaded: \(error.message)"
    }

    /// Whether `message` names the item at `path` (not only an item below it).
    static func message(_ message: String, names path: String) -> Bool {
        var rest = message[...]
        while let range = rest.range(of: path) {
            guard let next = rest[range.upperBound...].unicodeScalars.first else { return true }
            if " ;,:)'\"".unicodeScalars.contains(next) { return true }
            rest = rest[range.upperBound...]
        }
        return false
    }
}
