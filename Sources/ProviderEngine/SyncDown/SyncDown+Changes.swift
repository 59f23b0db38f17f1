import Foundation
import ProviderCore
import ProviderStore

extension SyncDown {
    /// Sync down from the store's change feed (`enumerateChanges` of `.workingSet`), batch after
    /// batch until nothing more is coming: changed and new items are placed folder by folder,
    /// parents first, as a walk would place them; deleted items go to the pass's gone list and
    /// are settled with everything else. Returns the anchor to ask from next time; the caller
    /// stores it only once the changes are settled, so a crash replays them (each step
    /// tolerates having been done already).
    /// - Throws: `syncAnchorExpired` when the feed no longer knows `anchor`, or names an item
    ///   whose folder neither the database nor the feed knows (the caller lists the whole store
    ///   instead); what the backend throws; `localIOFailure` when the database fails.
    func pullChanges(from anchor: SyncAnchor, pass: inout PullPass, report: inout SyncReport, events: EventHandler?)
        async throws(FileProviderError) -> SyncAnchor
    {
        var anchor = anchor
        var seen = 0
        do {
            while true {
                let changes = try await backend.enumerateChanges(in: .workingSet, from: anchor)
                seen += changes.updatedItems.count + changes.deletedIdentifiers.count
                try await apply(changes, pass: &pass, report: &report)
                try await pass.flush(to: context, wait: true)
                // What the feed showed is confirmed (a version the store did not keep was seen
                // while placing it). Its deletions are settled with the pass, and confirmed by
                // the next walk.
                let (store, domainID, shown) = (self.store, self.domainID, changes.updatedItems.map(\.identifier))
                try await context.blocking { () throws(FileProviderError) in try store.confirmUploads(domainID: domainID, shown) }
                events?(.listing(folders: 0, items: seen))
                anchor = changes.newAnchor
                if !changes.moreComing { break }
            }
        } catch {
            // Nothing of this pass may still be writing when the caller lists the store instead.
            try? await pass.flush(to: context, wait: true)
            throw error
        }
        report.listedItems = seen
        return anchor
    }

    /// Places one batch of changes.
    ///
    /// A change the store sent with an impossible value, an item named as its own folder, a
    /// folder moved into itself or a folder below it, and an item deeper or with a longer path
    /// than ``WalkBounds`` allows are skipped with a notice; what the database has of them
    /// stays as it was.
    private func apply(_ changes: ChangeSet, pass: inout PullPass, report: inout SyncReport) async throws(FileProviderError) {
        for refused in changes.refused {
            report.skip("", refused.message, notice: "\(display("")): skipped an item: \(refused.message)")
        }
        let rootLength = replica.root.path.utf8.count
        let updated = Set(changes.updatedItems.map(\.identifier))
        let deleted = changes.deletedIdentifiers.filter { !updated.contains($0) && $0 != .rootContainer }
        let (store, domainID) = (self.store, self.domainID)
        // The records of the deleted items, in one job on the engine's threads.
        pass.gone += try await context.blocking { () throws(FileProviderError) in
            var records: [ItemRecord] = []
            for identifier in deleted {
                if let record = try store.item(domainID: domainID, identifier: identifier), !record.path.isEmpty { records.append(record) }
            }
            return records
        }

        // Folders placed in this batch, with whether they are in the replica and new.
        var folders: [ItemIdentifier: FolderVisit] = [:]
        var pending: [Item] = []
        for item in changes.updatedItems where item.identifier != .rootContainer {
            guard item.parentIdentifier != item.identifier else {
                let problem = "\(item.filename.debugDescription) is named as its own folder; the store's change was left out"
                report.skip("", problem, notice: "\(display("")): skipped an item: \(problem)")
                continue
            }
            pending.append(item)
        }
        while !pending.isEmpty {
            var byParent: [ItemIdentifier: [Item]] = [:]
            for item in pending { byParent[item.parentIdentifier, default: []].append(item) }
            let pendingFolders = Set(pending.map(\.identifier))
            var waiting: [Item] = []
            var placed = false
            for (parent, items) in byParent {
                // A folder whose own change waits in this batch (new, or moved) comes first.
                // The folder and the items' records, in one job on the engine's threads.
                let (known, isNew) = (folders[parent], pass.newFolders.contains(parent))
                let (found, records) = try await context.blocking {
                    [self] () throws(FileProviderError) -> (FolderVisit?, [ItemRecord?]) in
                    var visit = known
                    if visit == nil { visit = try storedVisit(of: parent, isNew: isNew) }
                    guard !pendingFolders.contains(parent), let visit else { return (nil, []) }
                    var records: [ItemRecord?] = []
                    for item in items { records.append(try store.item(domainID: domainID, identifier: item.identifier)) }
                    return (visit, records)
                }
                guard let visit = found else {
                    waiting += items
                    continue
                }
                placed = true
                var entries: [FolderPlacer.Entry] = []
                var mustHold = false
                for (var item, stored) in zip(items, records) {
                    let inRoot = visit.record.path.isEmpty
                    if let problem = Replica.problem(withRemoteName: item.filename, inRoot: inRoot) {
                        report.skip(
                            inRoot ? item.filename : visit.record.path + "/" + item.filename, problem,
                            notice: "\(display(visit.record.path)): skipped an item: \(problem)")
                        continue
                    }
                    item.parentIdentifier = visit.record.identifier
                    let path = inRoot ? item.filename : visit.record.path + "/" + item.filename
                    var old = stored
                    if let known = old, known.kind == .folder,
                        visit.record.path == known.path || visit.record.path.hasPrefix(known.path + "/")
                    {
                        let problem =
                            "the folder \(item.filename.debugDescription) would move into itself (from \(display(known.path))); the store's change was left out"
                        report.skip(visit.record.path, problem, notice: "\(display(visit.record.path)): skipped an item: \(problem)")
                        continue
                    }
                    if let problem = WalkBounds.problem(placing: item.kind, at: path, rootLength: rootLength) {
                        report.skip(visit.record.path, problem, notice: "\(display(visit.record.path)): skipped an item: \(problem)")
                        continue
                    }
                    if let known = old, known.parentIdentifier != visit.record.identifier { pass.movedIn.insert(known.identifier) }
                    if let known = old, known.kind != item.kind {
                        pass.gone.append(known)
                        pass.movedIn.remove(known.identifier)
                        old = nil
                    }
                    if let known = old, FolderPlacer.mustHold(known) { mustHold = true }
                    entries.append((item, path, old))
                }
                if !pass.gone.isEmpty, entries.contains(where: { $0.old == nil }) {
                    let pairing = FolderPlacer.pairReplaced(&entries, gone: pass.gone)
                    if !pairing.paired.isEmpty { pass.gone.removeAll { pairing.paired.contains($0.identifier) } }
                    if pairing.mustHold { mustHold = true }
                }
                // A folder that moved under the same identifier takes what is below it along
                // (a walk would list it; the feed names only the folder).
                let moved = entries.compactMap { entry in
                    entry.old.flatMap { $0.kind == .folder && $0.path != entry.path ? ($0.path, entry.path) : nil }
                }
                var placed = visit
                let replacedBefore = pass.replaced.count
                for subfolder in try await placer.place(
                    consume entries, mustHold: mustHold, in: &placed, complete: false, pass: &pass, report: &report)
                {
                    folders[subfolder.record.identifier] = subfolder
                }
                try await placer.reparentReplacedFolders(pass.replaced[replacedBefore...])
                if !moved.isEmpty {
                    try await pass.flush(to: context, wait: true)
                    try await context.blocking { () throws(FileProviderError) in
                        for (from, to) in moved { try store.renameSubtree(domainID: domainID, from: from, to: to) }
                    }
                }
            }
            if !placed {
                let names = waiting.prefix(3).map { $0.identifier.rawValue.debugDescription }.joined(separator: ", ")
                throw FileProviderError(.syncAnchorExpired, "the change feed named items whose folder is unknown (\(names))")
            }
            // What the next round looks up must be in the database.
            try await pass.flush(to: context, wait: true)
            pending = waiting
        }
    }

    /// A stored folder as a place for items, or `nil` when the database has no such folder.
    /// Blocking.
    private func storedVisit(of identifier: ItemIdentifier, isNew: Bool) throws(FileProviderError) -> FolderVisit? {
        guard let record = try store.item(domainID: domainID, identifier: identifier), record.kind == .folder else { return nil }
        if record.path.isEmpty { return FolderVisit(record: record, isOnDisk: true, isNew: false) }
        let parent = try store.item(domainID: domainID, path: RelativePath(record.path).parent)
        return FolderVisit(record: record, isOnDisk: parent.map { !$0.isDataless } ?? false, isNew: isNew)
    }
}
