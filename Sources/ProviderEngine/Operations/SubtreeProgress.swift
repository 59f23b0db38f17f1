import ProviderCore

/// Progress of a recursive materialize over the whole subtree: the downloads of each page
/// report their own counts, which this adds to the pages done before, against the subtree's
/// totals (raised when a page finds more than was counted).
final class SubtreeProgress: Sendable {
    private let state: Mutex<(done: (bytes: Int64, items: Int, resumed: Int64), page: (bytes: Int64, items: Int, resumed: Int64))>
    private let totals: (count: Int, bytes: Int64)
    private let events: EventHandler?

    init(totals: (count: Int, bytes: Int64), events: EventHandler?) {
        self.totals = totals
        self.events = events
        state = Mutex(((0, 0, 0), (0, 0, 0)))
    }

    var handler: EventHandler? {
        guard let events else { return nil }
        return { [self] event in
            guard case .transfer(let bytes, _, let items, _, let resumed) = event else {
                events(event)
                return
            }
            let now = state.withLock { value in
                value.page = (bytes, items, resumed)
                return (
                    bytes: Self.add(value.done.bytes, bytes), items: value.done.items + items,
                    resumed: Self.add(value.done.resumed, resumed)
                )
            }
            events(
                .transfer(
                    completedBytes: now.bytes, totalBytes: max(totals.bytes, now.bytes), completedItems: now.items,
                    totalItems: max(totals.count, now.items), resumedBytes: now.resumed))
        }
    }

    /// Adds the finished page's counts to what is done.
    func finishPage() {
        state.withLock { value in
            value.done = (
                Self.add(value.done.bytes, value.page.bytes), value.done.items + value.page.items,
                Self.add(value.done.resumed, value.page.resumed)
            )
            value.page = (0, 0, 0)
        }
    }

    private static func add(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }
}
