import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// Applies a sync plan to the replica, then records the result in one transaction.
    ///
    /// Replica changes come first: after a crash the database still holds the old state, the
    /// next sync computes the same plan, and every step tolerates having been done already.
    func apply(_ plan: inout SyncPlan, report: inout SyncReport, events: EventHandler?) async throws(FileProviderError) {
        let replicaStarted = Date()
        var upserts: [ItemRecord] = []
        var deletions: [ItemIdentifier] = []
        var notices: [String] = []
        var redownload: [ItemRecord] = []
        let pinnedFolders = try pinnedFolderPaths()
        func underPinnedFolder(_ path: String) -> Bool {
            pinnedFolders.contains { path.hasPrefix($0 + "/") }
        }

        // 1. New folders, parents first.
        let newFolders = plan.newItems.filter { $0.item.kind == .folder }.sorted { $0.path < $1.path }
        let newFiles = plan.newItems.filter { $0.item.kind != .folder }
        let replica = self.replica
        let folderPaths = newFolders.map(\.path)
        let (folderErrors, folderInodes) = try await executor.run { () -> ([Int: FileProviderError], [Int: Int64]) in
            var errors: [Int: FileProviderError] = [:]
            var inodes: [Int: Int64] = [:]
            for (index, path) in folderPaths.enumerated() {
                do {
                    try replica.makeFolder(path)
                    inodes[index] = replica.fingerprint(atPath: replica.path(path))?.inode
                } catch {
                    errors[index] = FileProviderError.wrap(error)
                }
            }
            return (errors, inodes)
        }
        var failedFolders: [String] = []
        for (index, entry) in newFolders.enumerated() {
            if let error = folderErrors[index] {
                notices.append("\(display(entry.path)): \(error.message)")
                failedFolders.append(entry.path)
            } else {
                var record = ItemRecord(domainID: domainID, item: entry.item, path: entry.path)
                record.localInode = folderInodes[index]
                upserts.append(record)
            }
        }

        // 2. Moves of files found by content version.
        for (old, entry) in plan.moves {
            var record = old
            record.update(from: entry.item, path: entry.path)
            do {
                try await executor.run { [self, record] in try self.moveLocalCopy(of: old, to: record) }
                deletions.append(old.identifier)
                upserts.append(record)
                report.moved += 1
                if record.state == .materialized && underPinnedFolder(record.path) == false && record.isOutdated {
                    redownload.append(record)
                }
            } catch {
                notices.append("\(display(entry.path)): not moved from \(display(old.path)): \(error.message)")
            }
        }

        // 3. New files and symlinks: placeholders, written in parallel.
        let placeholders = newFiles.filter { entry in !failedFolders.contains { entry.path.hasPrefix($0 + "/") } }
        let records = placeholders.map { ItemRecord(domainID: domainID, item: $0.item, path: $0.path) }
        let placeholderErrors = await writePlaceholders(records, creating: true)
        for (index, record) in records.enumerated() {
            if let error = placeholderErrors[index] {
                notices.append("\(display(record.path)): \(error.message)")
            } else {
                upserts.append(record)
                if record.kind == .file && underPinnedFolder(record.path) { redownload.append(record) }
            }
        }
        report.added = upserts.count - report.moved

        // 4. Changed items.
        for (old, entry) in plan.changed {
            var record = old
            record.update(from: entry.item, path: entry.path)
            do {
                if old.path != record.path {
                    try await executor.run { [self, record] in try self.moveLocalCopy(of: old, to: record) }
                } else if record.state == .placeholder || record.state == .symlink {
                    let metadata = PlaceholderMetadata(domain: domain.name, record: record)
                    try await executor.run { [record] in try replica.writePlaceholder(record.path, metadata) }
                }
                if record.isOutdated { redownload.append(record) }
                if old.identifier != record.identifier { deletions.append(old.identifier) }
                upserts.append(record)
                report.updated += 1
            } catch {
                notices.append("\(display(entry.path)): not updated: \(error.message)")
            }
        }

        // 5. Deletions: files first, then folders deepest first.
        let goneFiles = plan.gone.filter { $0.kind != .folder }
        let goneFolders = plan.gone.filter { $0.kind == .folder }.sorted { $0.path > $1.path }
        for record in goneFiles {
            do {
                let kept = try await executor.run { [self] in try self.removeLocalCopy(of: record) }
                if kept { notices.append("\(display(record.path)): deleted in the store; the local copy has changes and was kept") }
                deletions.append(record.identifier)
                report.deleted += 1
            } catch {
                notices.append("\(display(record.path)): not removed: \(error.message)")
            }
        }
        for record in goneFolders {
            do {
                let removed = try await executor.run { try replica.removeFolderIfEmpty(record.path) }
                if !removed { notices.append("\(display(record.path)): deleted in the store; kept because it holds local files") }
                deletions.append(record.identifier)
                report.deleted += 1
            } catch {
                notices.append("\(display(record.path)): not removed: \(error.message)")
            }
        }

        report.phases.replica = Date().timeIntervalSince(replicaStarted)
        let databaseStarted = Date()
        try store.apply(domainID: domainID, upserts: upserts, deletions: deletions)
        report.phases.database = Date().timeIntervalSince(databaseStarted)
        report.notices.append(contentsOf: notices)

        // 6. Downloads: outdated materialized files and new files in pinned folders, and what an
        // earlier sync left undone (it recorded new versions, then was killed or failed to download).
        let planned = Set(redownload.map(\.identifier))
        redownload += try store.dueDownloads(domainID: domainID).filter { !planned.contains($0.identifier) }
        if !redownload.isEmpty {
            let downloadsStarted = Date()
            defer { report.phases.downloads = Date().timeIntervalSince(downloadsStarted) }
            let outcomes = await download(redownload, events: events)
            for outcome in outcomes {
                if let error = outcome.error { report.notices.append("\(outcome.path): not downloaded: \(error.message)") } else { report.downloaded += 1 }
            }
        }
    }

    /// Paths of pinned folders.
    func pinnedFolderPaths() throws(FileProviderError) -> [String] {
        try store.pinnedFolderPaths(domainID: domainID)
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
            if replica.fingerprint(atPath: source) == nil, replica.fingerprint(atPath: target) != nil { return }
            try replica.move(fromPath: source, toPath: target)
        case .placeholder, .symlink:
            try replica.writePlaceholder(new.path, PlaceholderMetadata(domain: domain.name, record: new))
            if old.path != new.path { try replica.removeFile(atPath: replica.placeholderPath(old.path)) }
        }
    }

    /// Removes an item's local copy. Returns true when a materialized file was kept because it
    /// changed locally. Blocking; runs on the executor.
    func removeLocalCopy(of record: ItemRecord) throws(FileProviderError) -> Bool {
        switch record.state {
        case .placeholder, .symlink:
            try replica.removeFile(atPath: replica.placeholderPath(record.path))
            return false
        case .materialized:
            let path = replica.path(record.path)
            guard let print = replica.fingerprint(atPath: path) else { return false }
            if hasLocalChanges(record, print) { return true }
            try replica.removeFile(atPath: path)
            return false
        case .folder:
            return try !replica.removeFolderIfEmpty(record.path)
        }
    }

    /// Whether a materialized file differs from what the engine wrote.
    func hasLocalChanges(_ record: ItemRecord, _ print: FileFingerprint) -> Bool {
        print.size != record.localSize || print.modificationNanos != record.localModificationNanos
            || print.inode != record.localInode
    }
}
