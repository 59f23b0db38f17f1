import Foundation
import ProviderCore

/// Which folders of a replica a sync up compares with the database: all of them, or the ones a
/// watcher saw change since the last sync (so a re-sync costs what changed, not the domain).
struct ScanScope: Sendable, Equatable {
    /// Compare every folder.
    var everything: Bool
    /// Folders whose own entries changed (relative paths, "" is the root): each is compared
    /// without the folders below it.
    var folders: Set<String>
    /// Folders that appeared (made, or moved in): compared with everything below them.
    var trees: Set<String>

    static let all = ScanScope(everything: true, folders: [], trees: [])
    static let none = ScanScope(everything: false, folders: [], trees: [])

    /// How many folders a scope names at most before it becomes ``all``: memory stays bounded
    /// however much changes between two syncs, and a change that large costs a full scan anyway.
    static let maximumFolders = 20_000

    mutating func formUnion(_ other: ScanScope) {
        if everything || other.everything {
            self = .all
            return
        }
        folders.formUnion(other.folders)
        trees.formUnion(other.trees)
        if folders.count + trees.count > Self.maximumFolders { self = .all }
    }

    /// The folders to read, each once: trees below another tree are dropped (it covers them),
    /// and so are folders at or below a tree. Sorted, so a scan's order does not depend on a
    /// set's.
    var roots: (folders: [String], trees: [String]) {
        let sortedTrees = trees.sorted()
        var kept: [String] = []
        for tree in sortedTrees where !kept.contains(where: { RelativePath(tree).isAtOrBelow($0) }) { kept.append(tree) }
        let keptFolders = folders.sorted().filter { folder in !kept.contains { RelativePath(folder).isAtOrBelow($0) } }
        return (keptFolders, kept)
    }
}

/// The folders that changed in one domain's replica since its last sync up, as a watcher saw
/// them (``ServeWatcher``), for a sync to compare only those (``ScanScope``). It starts as
/// ``ScanScope/all``: what changed before anyone watched is unknown. A layout that records
/// every change as it happens (``ReplicaChangeFeed``) feeds one too, starting from what a clean
/// stop left. Any thread.
public final class ChangedFolders: Sendable {
    private let state: Mutex<(scope: ScanScope, watchesComplete: Bool)>
    /// Waits until the watcher has handled what the kernel queued (``ServeWatcher/catchUp()``);
    /// `false` when it no longer watches. `nil`: nothing watches.
    private let catchUp = Mutex<(@Sendable () async -> Bool)?>(nil)

    public convenience init() { self.init(scope: .all) }

    /// Changes known so far: `scope` (``ReplicaChangeFeed/restore(home:domain:domainID:)``).
    init(scope: ScanScope) { state = Mutex((scope, true)) }

    /// What changed and was not taken yet (or was given back), without taking it.
    var pending: ScanScope { state.withLock { $0.scope } }

    /// The entries of the folder at `path` changed (a file made, written, removed, moved).
    package func folderChanged(_ path: String) {
        state.withLock { $0.scope.formUnion(ScanScope(everything: false, folders: [path], trees: [])) }
    }

    /// A folder appeared at `path` (made, or moved in), and so did the entry in its parent.
    package func treeAppeared(_ path: String) {
        let parent = RelativePath(path).parent
        state.withLock { $0.scope.formUnion(ScanScope(everything: false, folders: [parent], trees: [path])) }
    }

    /// Changes may have been missed (the kernel dropped events): the next sync compares
    /// everything.
    package func everythingChanged() {
        state.withLock { $0.scope = .all }
    }

    /// Some folders could not be watched (the inotify watch limit): every sync compares
    /// everything from now on.
    package func watchesIncomplete() {
        state.withLock {
            $0.watchesComplete = false
            $0.scope = .all
        }
    }

    /// Called by the watcher that reports to this object, once it watches every folder.
    package func watched(by catchUp: @escaping @Sendable () async -> Bool) {
        self.catchUp.withLock { $0 = catchUp }
    }

    /// Takes what changed since the last take, once the watcher has handled every event the
    /// kernel queued before this call (a file just moved is in the folder it left and in the one
    /// it entered, never in one alone). ``ScanScope/all`` when nothing watches.
    func take() async -> ScanScope {
        guard let catchUp = catchUp.withLock({ $0 }) else { return .all }
        if await !catchUp() { watchesIncomplete() }
        return state.withLock { state in
            defer { state.scope = state.watchesComplete ? .none : .all }
            return state.scope
        }
    }

    /// Gives back a scope a sync took but did not finish comparing or sending: the next sync
    /// compares it again.
    func putBack(_ scope: ScanScope) {
        state.withLock { $0.scope.formUnion(scope) }
    }
}
