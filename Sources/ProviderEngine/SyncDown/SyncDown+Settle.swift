import Foundation
import ProviderCore
import ProviderStore

extension SyncDown {
    /// The end of sync down: items the walk did not find again are settled. A stored file gone
    /// from its place while a new one with the same content version appeared is a move (its
    /// local copy and content policy follow it); the rest were deleted in the store, and their
    /// local copies go too (files first, then folders deepest first), except a materialized file
    /// with local changes, which is kept. Records change in one transaction after the replica,
    /// per batch: the contents of a folder a change feed names as deleted are read and settled
    /// a page at a time, deepest first (``RecordReader/forEachSubtreePage(below:deepestFirst:_:)``),
    /// before the items the feed named; a subtree of any size in bounded memory.
    func settle(_ pass: inout PullPass, report: inout SyncReport) async throws(FileProviderError) {
        var gone = pass.gone.filter { !pass.movedIn.contains($0.identifier) }
        var candidates = pass.newFilesByVersion
        if !pass.sweeps {
            // A change feed names a deleted folder, not always what was in it. Folders below
            // another one named are settled with its pages, and so is what the feed named in them.
            let named = Set(gone.lazy.filter { $0.kind == .folder }.map(\.path))
            func isBelowNamed(_ path: String) -> Bool {
                var parent = RelativePath(path).parent
                while !parent.isEmpty {
                    if named.contains(parent) { return true }
                    parent = RelativePath(parent).parent
                }
                return false
            }
            let tops = gone.filter { $0.kind == .folder && !isBelowNamed($0.path) }.map(\.path)
            if !tops.isEmpty { gone = gone.filter { !isBelowNamed($0.path) } }
            for top in tops {
                try await RecordReader(context: context).forEachSubtreePage(below: top, deepestFirst: true) {
                    page throws(FileProviderError) in
                    let batch = page.filter { !pass.movedIn.contains($0.identifier) }
                    try await settle(gone: batch, candidates: &candidates, pass: &pass, report: &report)
                    return true
                }
            }
        } else if pass.hadItems {
            // What the walk never reached: the contents of folders that went away, and records
            // whose parent is no longer in the store.
            var known = Set(gone.map(\.identifier))
            let (store, domainID, listed) = (self.store, self.domainID, pass.listedFolders)
            let unreached = try await context.blocking { () throws(FileProviderError) in
                try store.items(domainID: domainID, outside: listed)
            }
            for record in unreached {
                if pass.movedIn.contains(record.identifier) || !known.insert(record.identifier).inserted {
                    continue
                }
                if pass.failedFolders.contains(where: {
                    record.path == $0 || record.path.hasPrefix($0 + "/")
                }) {
                    continue
                }
                gone.append(record)
            }
        }
        try await settle(gone: gone, candidates: &candidates, pass: &pass, report: &report)
        if !pass.replaced.isEmpty {
            let (store, domainID, replaced) = (self.store, self.domainID, pass.replaced.map(\.old))
            try await context.blocking { () throws(FileProviderError) in
                try store.forgetReplaced(domainID: domainID, identifiers: replaced)
            }
        }
    }

    /// Settles one batch of items gone from where the database has them (see
    /// ``settle(_:report:)``): moves found by content version among `candidates` (the new files
    /// not yet paired, by content version), then deletions; the records in one transaction.
    /// A folder is removed only after the batches that hold what was below it.
    private func settle(
        gone: [ItemRecord], candidates: inout [Data: [ItemIdentifier]]?, pass: inout PullPass, report: inout SyncReport
    ) async throws(FileProviderError) {
        if gone.isEmpty { return }
        var gone = gone
        var upserts: [ItemRecord] = []
        var deletions: [ItemIdentifier] = []
        var notices: [String] = []

        // 1. Moves of files found by content version.
        if var available = candidates, !available.isEmpty {
            defer { candidates = available }
            var remaining: [ItemRecord] = []
            var pairs: [(old: ItemRecord, new: ItemIdentifier)] = []
            for old in gone {
                guard old.kind == .file, !old.contentVersion.isEmpty,
                    var list = available[old.contentVersion],
                    let identifier = list.popLast()
                else {
                    remaining.append(old)
                    continue
                }
                available[old.contentVersion] = list
                pairs.append((old, identifier))
            }
            // The new files' records, in one job on the engine's threads.
            let (store, domainID, identifiers) = (self.store, self.domainID, pairs.map(\.new))
            let found = try await executor.run {
                try identifiers.map { try store.item(domainID: domainID, identifier: $0) }
            }
            for ((old, _), found) in zip(pairs, found) {
                guard var record = found else {
                    remaining.append(old)
                    continue
                }
                do {
                    try await adoptLocalCopy(of: old, into: &record)
                    pass.noteMove(from: old, to: record)
                    upserts.append(record)
                    deletions.append(old.identifier)
                    report.moved += 1
                    report.added -= 1
                    context.logTransfer(record.path, "moved here from \(display(old.path)), as in the store")
                    if record.isOutdated { pass.redownload.append(record) }
                } catch {
                    report.skip(
                        record.path, "not moved from \(display(old.path)): \(error.message)",
                        notice: "\(display(record.path)): not moved from \(display(old.path)): \(error.message)")
                    remaining.append(old)
                }
            }
            gone = remaining
        }

        // 2. Deletions: files first, then folders deepest first.
        let goneFiles = gone.filter { $0.kind != .folder }
        let goneFolders = gone.filter { $0.kind == .folder }.sorted { $0.path > $1.path }
        let (store, domainID) = (self.store, self.domainID)
        for record in goneFiles {
            do {
                let (kept, unconfirmed) = try await executor.run { [self] () throws -> (Bool, Bool) in
                    // A file this replica sent that no listing showed since: the store took it
                    // and did not keep it. Its bytes stay (sent again as a new file).
                    var record = record
                    let unconfirmed =
                        try record.state == .materialized
                        && store.unconfirmedUpload(domainID: domainID, identifier: record.identifier) != nil
                    if unconfirmed { record.markContentsPending() }
                    return (try self.removeLocalCopy(of: record), unconfirmed)
                }
                if kept && unconfirmed {
                    notices.append(
                        "\(display(record.path)): the store took this file from this replica but no longer lists it; the local file was kept and is sent again"
                    )
                } else if kept {
                    notices.append(
                        "\(display(record.path)): deleted in the store; the local copy has changes and was kept"
                    )
                }
                deletions.append(record.identifier)
                report.deleted += 1
                context.logTransfer(record.path, "removed (deleted in the store)")
            } catch {
                report.skip(record.path, "not removed: \(error.message)", notice: "\(display(record.path)): not removed: \(error.message)")
            }
        }
        let replica = self.replica
        for record in goneFolders {
            do {
                let removed = try await executor.run { try replica.removeFolderIfEmpty(record.path) }
                if !removed {
                    notices.append(
                        "\(display(record.path)): deleted in the store; kept because it holds local files")
                }
                deletions.append(record.identifier)
                report.deleted += 1
                context.logTransfer(record.path, "removed (deleted in the store)")
            } catch {
                report.skip(record.path, "not removed: \(error.message)", notice: "\(display(record.path)): not removed: \(error.message)")
            }
        }
        let written = Date()
        try await context.blocking { [upserts, deletions] () throws(FileProviderError) in
            try store.apply(domainID: domainID, upserts: upserts, deletions: deletions)
            try store.confirmUploads(domainID: domainID, deletions)
        }
        pass.databaseSeconds += Date().timeIntervalSince(written)
        report.notices.append(contentsOf: notices)
    }

    /// Gives a new record the local copy and content policy of a stored file that moved to it:
    /// a materialized file is moved into place (its folder populated first) over the new
    /// placeholder; an old placeholder is removed.
    private func adoptLocalCopy(
        of old: ItemRecord, into record: inout ItemRecord
    )
        async throws(FileProviderError)
    {
        // A policy set on the old item stays with the file.
        record.contentPolicy = record.contentPolicy ?? old.contentPolicy
        let replica = self.replica
        guard old.state == .materialized, try await executor.run({ [self] in localCopyExists(old) })
        else {
            if old.state == .placeholder || old.state == .symlink {
                try await executor.run { try replica.removePlaceholder(old.path) }
            }
            return
        }
        try await populateFolder(RelativePath(record.path).parent)
        let target = record.path
        let identifier = record.identifier
        try await executor.run {
            // The file is the new item's download now, should a crash come before its row.
            DownloadMark.carry(old, atPath: old.path, to: identifier, in: replica)
            try replica.placeFile(fromPath: replica.path(old.path), at: target)
        }
        record.state = .materialized
        record.localContentVersion = old.localContentVersion
        record.localSize = old.localSize
        record.localModificationNanos = old.localModificationNanos
        record.localInode = old.localInode
    }
}
