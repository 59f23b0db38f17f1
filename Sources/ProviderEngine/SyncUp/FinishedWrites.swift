import Foundation

/// Files of a replica that a watcher saw finished being written: closed after writing (inotify
/// `IN_CLOSE_WRITE`) or renamed into place (`IN_MOVED_TO`, as editors save), each with its
/// modification time at that moment. The scan uploads such a file at once instead of waiting for
/// the settle time, as long as it still has that modification time; a write seen after the event
/// (`IN_MODIFY`) takes the file off the list. `serve` feeds it, in the order of the events; any
/// thread.
public final class FinishedWrites: Sendable {
    private struct Entry {
        var modificationNanos: Int64
        var seen: Date
    }

    private let entries = Mutex<[String: Entry]>([:])

    public init() {}

    /// Records that the file at a relative path is complete with this modification time.
    public func finished(_ path: String, modificationNanos: Int64) {
        entries.withLock { $0[path] = Entry(modificationNanos: modificationNanos, seen: Date()) }
    }

    /// Records that the file at a relative path is being written again.
    public func writing(_ path: String) {
        _ = entries.withLock { $0.removeValue(forKey: path) }
    }

    /// Relative path → modification time (ns) of each finished file, after dropping entries
    /// older than `age` seconds (the settle time covers those anyway).
    func current(maximumAge age: Double) -> [String: Int64] {
        let cutoff = Date().addingTimeInterval(-age)
        return entries.withLock { map in
            map = map.filter { $0.value.seen >= cutoff }
            return map.mapValues(\.modificationNanos)
        }
    }
}
