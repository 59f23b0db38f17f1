import Foundation
import ProviderCore
import ProviderStore

/// What the local scan found so far, folder by folder, and the pairing of it once the walk is
/// done: an item missing from one folder may turn up in another (a move), so missing items and
/// new paths wait for the end. Everything here grows with what changed in the replica, not with
/// the domain: the records of a missing folder's subtree are read again from the database
/// (``ScanRecords/forEachDescendant(of:_:)``), one at a time, only when something could pair
/// with them.
struct ScanFindings {
    /// The most entries of each kind (``Overflow``) one scan holds. A walk that finds more goes
    /// on to the end but keeps no more of that kind; what it kept is acted on only where that
    /// stays right without the rest (``settle(_:settled:)``), and the next scan finds the rest.
    static let defaultLimit = 20_000

    /// Kinds of entries a scan can find more of than it holds.
    struct Overflow: OptionSet {
        let rawValue: Int
        static let changes = Overflow(rawValue: 1 << 0)
        static let missing = Overflow(rawValue: 1 << 1)
        static let created = Overflow(rawValue: 1 << 2)
        static let overwritten = Overflow(rawValue: 1 << 3)
        static let stray = Overflow(rawValue: 1 << 4)
        static let unsettled = Overflow(rawValue: 1 << 5)
        static let evicted = Overflow(rawValue: 1 << 6)
        static let placed = Overflow(rawValue: 1 << 7)
    }

    /// The most entries of each kind this scan holds.
    let limit: Int
    /// The kinds this scan found more of than it holds.
    private(set) var overflowed: Overflow = []

    private(set) var changes: [LocalChange] = []
    private(set) var unsettled: [String] = []
    private(set) var evicted: [ItemRecord] = []
    private(set) var placed: [PlacedFile] = []
    var occupiedDataless: [String] = []
    /// Records whose item is not at its path (their folder was read; what is below a missing
    /// folder is not listed here).
    private(set) var missing: [ItemRecord] = []
    /// Files and folders at paths the database does not know, and real files that took the
    /// name of an item whose placeholder moved away.
    private(set) var created: [(path: String, entry: LocalScanner.Entry)] = []
    /// Items that are not downloaded with a real file at their name and no placeholder there:
    /// a move (when their placeholder turns up elsewhere) or a file written over them.
    var overwritten: [(record: ItemRecord, entry: LocalScanner.Entry)] = []
    /// Identifier key → paths of this domain's placeholders that no record at their path owns.
    private(set) var stray: [UInt64: [String]] = [:]
    private var strayCount = 0

    init(limit: Int = Self.defaultLimit) {
        self.limit = max(1, limit)
    }

    /// Whether a list of `count` entries of `kind` takes one more; marks the kind overflowed
    /// when it does not.
    private mutating func admits(_ count: Int, _ kind: Overflow) -> Bool {
        if count < limit { return true }
        overflowed.insert(kind)
        return false
    }

    mutating func add(_ change: LocalChange) {
        if admits(changes.count, .changes) { changes.append(change) }
    }

    mutating func addUnsettled(_ path: String) {
        if admits(unsettled.count, .unsettled) { unsettled.append(path) }
    }

    mutating func addEvicted(_ record: ItemRecord) {
        if admits(evicted.count, .evicted) { evicted.append(record) }
    }

    mutating func addPlaced(_ file: PlacedFile) {
        if admits(placed.count, .placed) { placed.append(file) }
    }

    mutating func addMissing(_ record: ItemRecord) {
        if admits(missing.count, .missing) { missing.append(record) }
    }

    mutating func addCreated(_ path: String, _ entry: LocalScanner.Entry) {
        if admits(created.count, .created) { created.append((path, entry)) }
    }

    mutating func addOverwritten(_ record: ItemRecord, _ entry: LocalScanner.Entry) {
        if admits(overwritten.count, .overwritten) { overwritten.append((record, entry)) }
    }

    /// A placeholder at `path` that no record at its path owns, standing for the item of `key`.
    mutating func addStray(_ key: UInt64, _ path: String) {
        guard admits(strayCount, .stray) else { return }
        stray[key, default: []].append(path)
        strayCount += 1
    }

    /// Whether every new path and every stray placeholder of the replica is held: only then can
    /// an item missing from its path be told deleted rather than moved somewhere not held.
    var holdsEveryDestination: Bool { overflowed.isDisjoint(with: [.created, .stray]) }

    /// Pairs missing items with new paths (moves by inode, or by a placeholder's identifier),
    /// and makes the rest creations and deletions; a moved or deleted folder covers everything
    /// below it. Placeholders no missing item owns are stray.
    /// - Throws: `localIOFailure` when the database fails.
    mutating func settle(_ records: some ScanRecords, settled: (FileFingerprint, String) -> Bool) throws(FileProviderError)
        -> LocalScanResult
    {
        for key in stray.keys { stray[key]!.sort() }
        // New paths, parents first.
        created.sort { $0.path < $1.path }
        var createdByInode: [Int64: Int] = [:]
        for (index, entry) in created.enumerated() { createdByInode[entry.entry.fingerprint.inode] = index }
        var movedAway = Set<Int>()
        var movedFolders: [String] = []
        // Placeholders carrying a missing item's identifier belong to a move this scan saw (of
        // the item, or of a folder above it): they are kept.
        let strayKeys = Set(stray.keys)
        var ownedKeys = Set<UInt64>()
        func note(_ record: ItemRecord) {
            if strayKeys.isEmpty { return }
            let key = PlaceholderOwner.key(record.identifier.rawValue)
            if strayKeys.contains(key) { ownedKeys.insert(key) }
        }
        // Moves: a missing item whose inode (or placeholder identifier) turns up at a new path.
        func pair(_ record: ItemRecord) -> Bool {
            if let inode = record.localInode, let index = createdByInode[inode], !movedAway.contains(index),
                created[index].entry.kind == (record.kind == .folder ? .folder : .file)
            {
                movedAway.insert(index)
                changes.append(.moved(record: record, to: created[index].path, fingerprint: created[index].entry.fingerprint))
                if record.kind == .folder { movedFolders.append(record.path) }
                return true
            }
            if record.state == .placeholder || record.state == .symlink,
                var targets = stray[PlaceholderOwner.key(record.identifier.rawValue)], !targets.isEmpty
            {
                let target = targets.removeFirst()
                stray[PlaceholderOwner.key(record.identifier.rawValue)] = targets
                changes.append(.moved(record: record, to: target, fingerprint: nil))
                return true
            }
            return false
        }
        func isBelow(_ path: String, _ folders: [String]) -> Bool {
            folders.contains { path.hasPrefix($0 + "/") }
        }
        var remaining: [ItemRecord] = []
        for record in missing.sorted(by: { $0.path < $1.path }) {
            note(record)
            if isBelow(record.path, movedFolders) { continue }
            let moved = pair(record)
            if !moved { remaining.append(record) }
            guard record.kind == .folder else { continue }
            // Below a moved folder only the identifiers matter (placeholders moved with it); below a
            // deleted one, an item may have moved out first. Nothing new: nothing to read.
            let pairs = !moved && (!createdByInode.isEmpty || !stray.isEmpty)
            if !pairs && strayKeys.isEmpty { continue }
            // The items of a dataless folder were never in the replica: not missing.
            var dataless: Set<String> = record.isDataless ? [record.path] : []
            try records.forEachDescendant(of: record.path) { below in
                if dataless.contains(RelativePath(below.path).parent) { return }
                if below.isDataless { dataless.insert(below.path) }
                note(below)
                if pairs && !isBelow(below.path, movedFolders) { _ = pair(below) }
            }
        }
        let movedTargets = movedAway.map { created[$0].path }
        let left = created.enumerated().filter { !movedAway.contains($0.offset) }.map(\.element)
            .filter { entry in !isBelow(entry.path, movedTargets) }
        // A new path may be where an item the walk let go of moved: sent as new, the move would
        // become a copy and a deletion. Held back while this pass's deletions make progress
        // instead (the next scan holds fewer missing items); sent when they cannot.
        let holdsBackCreations = overflowed.contains(.missing) && holdsEveryDestination
        for (path, entry) in left where !holdsBackCreations {
            if entry.kind == .file && !settled(entry.fingerprint, path) {
                unsettled.append(path)
                continue
            }
            changes.append(.created(path: path, kind: entry.kind, fingerprint: entry.fingerprint))
        }
        // Deletions; a deleted folder covers everything below it. Where the walk found more new
        // paths or stray placeholders than it holds, a missing item may have moved to one it
        // let go: its deletion waits for a scan that holds them.
        var deletedFolders: [String] = []
        for record in remaining where holdsEveryDestination {
            if isBelow(record.path, deletedFolders) || isBelow(record.path, movedFolders) { continue }
            changes.append(.deleted(record: record))
            if record.kind == .folder { deletedFolders.append(record.path) }
        }
        // A placeholder no missing item owns is stray only when every missing item was held.
        let unowned = overflowed.contains(.missing) ? [] : stray.filter { !ownedKeys.contains($0.key) }.values.joined().sorted()
        var result = LocalScanResult(
            changes: changes, unsettled: unsettled, strayPlaceholders: unowned, evicted: evicted, occupiedDataless: [], placed: placed)
        result.isPartial = !overflowed.isEmpty
        return result
    }
}
