import ProviderCore

/// How many transfers of a domain run at once: the engine's own depths, or more where the
/// backend runs more (``BackendCapabilities/concurrentTransfers``, a number from the backend:
/// bounded here, at most ``maximum``).
enum TransferDepths {
    /// The most download batches or uploads of one domain at once, whatever a backend says.
    static let maximum = 64

    /// `base`, or the backend's number of concurrent transfers when it is larger.
    static func depth(_ base: Int, for capabilities: BackendCapabilities) -> Int {
        guard let wanted = capabilities.concurrentTransfers else { return base }
        return max(base, min(wanted, maximum))
    }
}
