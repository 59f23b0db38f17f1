import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// The end of sync down: items the walk did not find again are settled. A stored file gone
    /// from its place while a new one with the same content version appeared is a move (its
    /// local copy and content policy follow it); the rest were deleted in the store, and their
    /// local copies go too (files first, then folders deepest first), except a materialized file
    /// with local changes, which is kept. Records change in one transaction after the replica.
    func settle(_ pass: inout PullPass, report: inout SyncReport) async throws(FileProviderError) {
        var gone = pass.gone.filter { !pass.movedIn.contains($0.identifier) }
        if !pass.sweeps {
            // A change feed names a deleted folder, not always what was in it.
            var known = Set(gone.map(\.identifier))
            for folder in gone where folder.kind == .folder {
                for record in try store.descendants(domainID: domainID, of: folder.path)
                where !pass.movedIn.contains(record.identifier) && known.insert(record.identifier).inserted {
                    gone.append(record)
                }
            }
        } else if pass.hadItems {
            // What the walk never reached: the contents of folders that went away, and records
            // whose parent is no longer in the store.
            var known = Set(gone.map(\.identifier))
            for record in try store.items(domainID: domainID, outside: pass.listedFolders) {
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
        if gone.isEmpty { return }
        var upserts: [ItemRecord] = []
        var deletions: [ItemIdentifier] = []
        var notices: [String] = []

        // 1. Moves of files found by content version.
        if var candidates = pass.newFilesByVersion, !candidates.isEmpty {
            var remaining: [ItemRecord] = []
            for old in gone {
                guard old.kind == .file, !old.contentVersion.isEmpty,
                    var list = candidates[old.contentVersion],
                    let identifier = list.popLast(),
                    var record = try store.item(domainID: domainID, identifier: identifier)
                else {
                    remaining.append(old)
                    continue
                }
                candidates[old.contentVersion] = list
                do {
                    try await adoptLocalCopy(of: old, into: &record)
                    upserts.append(record)
                    deletions.append(old.identifier)
                    report.moved += 1
                    report.added -= 1
                    if record.isOutdated { pass.redownload.append(record) }
                } catch {
                    notices.append(
                        "\(display(record.path)): not moved from \(display(old.path)): \(error.message)")
                    remaining.append(old)
                }
            }
            gone = remaining
        }

        // 2. Deletions: files first, then folders deepest first.
        let goneFiles = gone.filter { $0.kind != .folder }
        let goneFolders = gone.filter { $0.kind == .folder }.sorted { $0.path > $1.path }
        for record in goneFiles {
            do {
                let kept = try await executor.run { [self] in try self.removeLocalCopy(of: record) }
                if kept {
                    notices.append(
                        "\(display(record.path)): deleted in the store; the local copy has changes and was kept"
                    )
                }
                deletions.append(record.identifier)
                report.deleted += 1
            } catch {
                notices.append("\(display(record.path)): not removed: \(error.message)")
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
            } catch {
                notices.append("\(display(record.path)): not removed: \(error.message)")
            }
        }
        let written = Date()
        try store.apply(domainID: domainID, upserts: upserts, deletions: deletions)
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
        try await populateFolder(Self.split(record.path).parent, ancestors: true)
        let target = record.path
        let identifier = record.identifier
        try await executor.run {
            // The file is the new item's download now, should a crash come before its row.
            DownloadMark.carry(atPath: replica.path(old.path), from: old.identifier, to: identifier)
            try replica.placeFile(fromPath: replica.path(old.path), at: target)
        }
        record.state = .materialized
        record.localContentVersion = old.localContentVersion
        record.localSize = old.localSize
        record.localModificationNanos = old.localModificationNanos
        record.localInode = old.localInode
    }

    /// Writes placeholders on several threads; returns the errors by index.
    func writePlaceholders(_ records: [ItemRecord], creating: Bool) async -> [Int: FileProviderError] {
        if records.isEmpty { return [:] }
        let replica = self.replica
        let name = domain.name
        let chunks = max(1, min(executor.threadCount, records.count / 256))
        let size = (records.count + chunks - 1) / chunks
        return await withTaskGroup(of: [Int: FileProviderError].self) { group in
            for chunk in 0..<chunks {
                let range = (chunk * size)..<min(records.count, (chunk + 1) * size)
                let slice = Array(records[range])
                let base = range.lowerBound
                group.addTask { [executor] in
                    do {
                        return try await executor.run {
                            var errors: [Int: FileProviderError] = [:]
                            for (offset, record) in slice.enumerated() {
                                let metadata = PlaceholderMetadata(domain: name, record: record)
                                do {
                                    if creating {
                                        try replica.createPlaceholder(record.path, metadata)
                                    } else {
                                        try replica.writePlaceholder(record.path, metadata)
                                    }
                                } catch {
                                    errors[base + offset] = FileProviderError.wrap(error)
                                }
                            }
                            return errors
                        }
                    } catch {
                        let wrapped = FileProviderError.wrap(error)
                        return Dictionary(uniqueKeysWithValues: range.map { ($0, wrapped) })
                    }
                }
            }
            var all: [Int: FileProviderError] = [:]
            for await errors in group { all.merge(errors) { first, _ in first } }
            return all
        }
    }

    /// Moves an item's local copy (its file, placeholder or folder) to the record's new path.
    /// Blocking; runs on the executor.
    func moveLocalCopy(of old: ItemRecord, to new: ItemRecord) throws(FileProviderError) {
        switch old.state {
        case .materialized, .folder:
            let source = replica.path(old.path)
            let target = replica.path(new.path)
            if replica.fingerprint(atPath: source) == nil, replica.fingerprint(atPath: target) != nil {
                return
            }
            if old.state == .materialized { DownloadMark.carry(atPath: source, from: old.identifier, to: new.identifier) }
            try replica.move(fromPath: source, toPath: target)
        case .placeholder, .symlink:
            try replica.writePlaceholder(new.path, PlaceholderMetadata(domain: domain.name, record: new))
            if old.path != new.path { try replica.removePlaceholder(old.path) }
        }
    }

    /// Removes an item's local copy. Returns true when a materialized file was kept because it
    /// changed locally. Blocking; runs on the executor.
    func removeLocalCopy(of record: ItemRecord) throws(FileProviderError) -> Bool {
        switch record.state {
        case .placeholder, .symlink:
            try replica.removePlaceholder(record.path)
            return false
        case .materialized:
            let path = replica.path(record.path)
            guard let print = replica.fingerprint(atPath: path) else { return false }
            if replica.hasLocalChanges(record, print) { return true }
            try replica.removeFile(atPath: path)
            return false
        case .folder:
            return try !replica.removeFolderIfEmpty(record.path)
        }
    }
}
