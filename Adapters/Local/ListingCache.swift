import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Sorted name listings of large folders, so that paging through a folder reads it once.
///
/// A listing is kept only while its folder is provably unchanged: it is keyed by the folder's
/// device, inode and change time (which every added, removed or renamed entry updates and
/// which cannot be set by hand), and it is stored only when that change time was at least two
/// seconds old when the folder was read, so a change within the same clock tick cannot be
/// missed.
final class ListingCache: @unchecked Sendable {
    struct Key: Hashable {
        var device: UInt64
        var inode: UInt64
        var changeTime: Int64
        var modificationTime: Int64

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            changeTime = info.st_ctim.nanoseconds
            modificationTime = info.st_mtim.nanoseconds
        }
    }

    /// How many listings are kept.
    static let capacity = 4
    /// How old a folder's change time must be before its listing is kept.
    static let settleTime: Int64 = 2_000_000_000

    private let lock = NSLock()
    private var entries: [Key: [[UInt8]]] = [:]
    private var order: [Key] = []

    /// The listing of a folder in this state, if kept.
    func names(for key: Key) -> [[UInt8]]? {
        lock.withLock { entries[key] }
    }

    /// Keeps a listing read from a folder in the state `key`, when that state is old enough.
    func store(_ names: [[UInt8]], for key: Key) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        guard now.nanoseconds - key.changeTime >= Self.settleTime else { return }
        lock.withLock {
            if entries[key] == nil { order.append(key) }
            entries[key] = names
            while order.count > Self.capacity { entries[order.removeFirst()] = nil }
        }
    }
}
