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
    var changes: [LocalChange] = []
    var unsettled: [String] = []
    var evicted: [ItemRecord] = []
    var placed: [PlacedFile] = []
    var occupiedDataless: [String] = []
    /// Records whose item is not at its path (their folder was read; what is below a missing
    /// folder is not listed here).
    var missing: [ItemRecord] = []
    /// Files and folders at paths the database does not know, and real files that took the
    /// name of an item whose placeholder moved away.
    var created: [(path: String, entry: LocalScanner.Entry)] = []
    /// Items that are not downloaded with a real file at their name and no placeholder there:
    /// a move (when their placeholder turns up elsewhere) or a file written over them.
    var overwritten: [(record: ItemRecord, entry: LocalScanner.Entry)] = []
    /// Identifier key → paths of this domain's placeholders that no record at their path owns.
    var stray: [UInt64: [String]] = [:]

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
                if dataless.contains(DomainController.split(below.path).parent) { return }
                if below.isDataless { dataless.insert(below.path) }
                note(below)
                if pairs && !isBelow(below.path, movedFolders) { _ = pair(below) }
            }
        }
        let movedTargets = movedAway.map { created[$0].path }
        let left = created.enumerated().filter { !movedAway.contains($0.offset) }.map(\.element)
            .filter { entry in !isBelow(entry.path, movedTargets) }
        for (path, entry) in left {
            if entry.kind == .file && !settled(entry.fingerprint, path) {
                unsettled.append(path)
                continue
            }
            changes.append(.created(path: path, kind: entry.kind, fingerprint: entry.fingerprint))
        }
        // Deletions; a deleted folder covers everything below it.
        var deletedFolders: [String] = []
        for record in remaining {
            if isBelow(record.path, deletedFolders) || isBelow(record.path, movedFolders) { continue }
            changes.append(.deleted(record: record))
            if record.kind == .folder { deletedFolders.append(record.path) }
        }
        let unowned = stray.filter { !ownedKeys.contains($0.key) }.values.joined().sorted()
        return LocalScanResult(
            changes: changes, unsettled: unsettled, strayPlaceholders: unowned, evicted: evicted, occupiedDataless: [], placed: placed)
    }
}
