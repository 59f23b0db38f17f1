import Foundation
import ProviderCore
import ProviderSystem

/// The exact local change feed of a domain whose layout sees every change programs make
/// (``ReplicaLayout/recordsLocalChanges``: the FUSE layout, whose file system makes each change
/// in the backing folder itself). Each change is recorded as it happens, before the reply that
/// makes it visible: the folders whose entries changed go to ``changes`` (what sync up compares,
/// nothing else: no watcher, no walk of unchanged folders), a file opened for writing is being
/// written until its last release and then finished (``FinishedWrites``: uploaded without the
/// settle wait). Any thread; recording is a lock and a set insertion.
///
/// **Crashes.** The feed is kept in memory while `serve` runs, and written to the state folder
/// (``path(home:domain:)``) when `serve` stops cleanly, after the mount is gone. A new `serve`
/// takes that record and removes it (``restore(home:domain:domainID:)``): with no record (the
/// last `serve` was killed, the machine stopped, the domain is new or was converted, removed and
/// added again) the feed cannot be trusted and its first sync compares the whole replica once.
/// Nothing is written per change: the cost of a write through the mount stays that of the
/// backing file system (Docs/FUSE.md, "The local change feed").
public final class ReplicaChangeFeed: Sendable {
    /// What sync up takes: the folders that changed since the last sync up.
    public let changes: ChangedFolders
    /// Whether the feed was restored from a clean stop (`false`: the first sync compares everything).
    public let isTrusted: Bool
    /// Where the files finished being written go (the domain controller's, once it is loaded).
    private let writesTarget = Mutex<(@Sendable () -> FinishedWrites?)?>(nil)
    /// Told after changes (wakes the domain's serve loop), at most every ``wakeInterval``.
    private let changed = Mutex<(@Sendable () -> Void)?>(nil)
    /// When ``changed`` was last told (monotonic ns), and whether a call after the interval is
    /// scheduled for the changes made since.
    private let lastWake = Mutex<(nanos: UInt64, trailing: Bool)>((0, false))
    /// The shortest time between two wakes of the serve loop: a program writing thousands of
    /// files would otherwise wake it (a database read each) for every operation, where inotify
    /// wakes it once per batch of events. A change within the interval is told at its end.
    static let wakeInterval: UInt64 = 50_000_000

    init(scope: ScanScope, trusted: Bool) {
        changes = ChangedFolders(scope: scope)
        isTrusted = trusted
        // Recorded before the reply that made each change visible: nothing is queued elsewhere.
        changes.watched { true }
    }

    /// A feed that knows nothing yet: its first sync compares everything (tests, a domain
    /// served for the first time).
    public convenience init() { self.init(scope: .all, trusted: false) }

    /// Calls `body` after changes, on the thread that recorded one or, for changes within
    /// ``wakeInterval`` of the last call, once at its end on a dispatch thread.
    public func onChange(_ body: (@Sendable () -> Void)?) { changed.withLock { $0 = body } }

    /// Tells ``changed`` of a change now, or schedules one call at the end of the interval.
    private func wake() {
        let now = DispatchTime.now().uptimeNanoseconds
        let delay = lastWake.withLock { last -> UInt64? in
            if now >= last.nanos + Self.wakeInterval {
                last.nanos = now
                return 0
            }
            if last.trailing { return nil }
            last.trailing = true
            return last.nanos + Self.wakeInterval - now
        }
        guard let delay else { return }
        if delay == 0 {
            changed.withLock { $0 }?()
            return
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(delay))) { [self] in
            lastWake.withLock { $0 = (DispatchTime.now().uptimeNanoseconds, false) }
            changed.withLock { $0 }?()
        }
    }

    /// Files finished being written are told to what `target` gives from now on (the domain's
    /// loaded controller's ``DomainController/finishedWrites``; `nil`: none is loaded).
    public func sendFinishedWrites(to target: @escaping @Sendable () -> FinishedWrites?) { writesTarget.withLock { $0 = target } }

    private var writes: FinishedWrites? { writesTarget.withLock { $0 }?() }

    // MARK: Recording

    /// The item at `path` (relative) was made (`create`, `mknod`, `symlink`), written, truncated,
    /// or had its mode or times set, or was removed (`unlink`, `rmdir`): its folder's entries
    /// changed.
    public func itemChanged(_ path: String) {
        changes.folderChanged(RelativePath(path).parent)
        wake()
    }

    /// A folder was made at `path`: it is compared with everything below it.
    public func folderMade(_ path: String) {
        changes.treeAppeared(path)
        wake()
    }

    /// The item at `from` was renamed to `to` (replacing what was there): both folders are
    /// compared together, so the scan pairs the two names as a move; a folder moved is compared
    /// with everything below it.
    public func moved(from: String, to: String, isFolder: Bool) {
        changes.folderChanged(RelativePath(from).parent)
        if isFolder { changes.treeAppeared(to) } else { changes.folderChanged(RelativePath(to).parent) }
        if !isFolder { writes?.writing(from) }
        wake()
    }

    /// The file at `path` is being written (opened for writing, or written): not finished.
    public func writing(_ path: String) {
        writes?.writing(path)
        itemChanged(path)
    }

    /// The last writer of the file at `path` let it go (its last release), with this
    /// modification time: finished, uploaded by the next sync without the settle wait.
    public func finished(_ path: String, modificationNanos: Int64) {
        writes?.finished(path, modificationNanos: modificationNanos)
        itemChanged(path)
    }

    // MARK: Surviving a stop

    /// The record of a domain's feed kept between two `serve` processes:
    /// `<home>/replica-changes/<domain>.json`, in a folder only its owner opens.
    public static func path(home: URL, domain: String) -> String {
        home.appendingPathComponent("replica-changes").appendingPathComponent(domain + ".json").path
    }

    /// The feed a clean stop left for the domain, taken (the record is removed: a `serve`
    /// killed from now on leaves none), or a feed whose first sync compares everything when
    /// there is none, it is another domain's (`domainID` differs), or it cannot be read.
    /// Blocking.
    public static func restore(home: URL, domain: String, domainID: Int64) -> ReplicaChangeFeed {
        let path = path(home: home, domain: domain)
        let data = FileManager.default.contents(atPath: path)
        // Removed before anything is served: from now on only a clean stop writes it again.
        if data != nil { unlink(path) }
        guard let data, let record = try? JSONDecoder().decode(Record.self, from: data), record.domainID == domainID else {
            return ReplicaChangeFeed()
        }
        var scope = ScanScope(everything: record.everything, folders: Set(record.folders), trees: Set(record.trees))
        if scope.folders.count + scope.trees.count > ScanScope.maximumFolders { scope = .all }
        return ReplicaChangeFeed(scope: scope, trusted: true)
    }

    /// Writes what changed and was not sent yet, for the next `serve` of the domain: call it once
    /// nothing can change any more (the mount is gone) and no sync runs. Blocking.
    /// - Throws: `localIOFailure` when the record cannot be written (the next `serve` then
    ///   compares everything once).
    public func save(home: URL, domain: String, domainID: Int64) throws(FileProviderError) {
        let scope = changes.pending
        let record = Record(
            domainID: domainID, everything: scope.everything, folders: scope.folders.sorted(), trees: scope.trees.sorted())
        let path = Self.path(home: home, domain: domain)
        do {
            try PrivateFolder.make(atPath: (path as NSString).deletingLastPathComponent)
            try JSONEncoder().encode(record).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot keep \(domain)'s local changes in \(path): \(error)")
        }
    }

    /// Removes a domain's record (its layout changed, or it was removed): the next `serve`
    /// compares everything once. Blocking.
    public static func forget(home: URL, domain: String) {
        unlink(path(home: home, domain: domain))
    }

    private struct Record: Codable {
        var domainID: Int64
        var everything: Bool
        var folders: [String]
        var trees: [String]
    }
}
