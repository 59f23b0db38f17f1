import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// Downloads files (`startProvidingItem`): each into a staging file, checked for size, dated,
    /// renamed into place; the placeholder is removed and the new state recorded. Folders stand
    /// for the files directly in them, or below them with `recursive`.
    ///
    /// Never throws: each item's outcome says whether it worked.
    public func materialize(paths: [String], recursive: Bool, events: EventHandler? = nil) async -> [ItemOutcome] {
        var outcomes: [ItemOutcome] = []
        var files: [ItemRecord] = []
        // Folders to show in the replica: the folders named and, with `recursive`, every folder
        // below them (empty ones too), besides the folders of the files.
        var folders: [String] = []
        for path in paths {
            do {
                let target = try record(at: path)
                if target.kind == .folder {
                    let inside = recursive ? try store.descendants(domainID: domainID, of: path) : try store.children(domainID: domainID, parent: target.identifier)
                    files += inside.filter { $0.kind == .file }
                    folders.append(path)
                    if recursive { folders += inside.filter { $0.kind == .folder && $0.isDataless }.map(\.path) }
                } else if target.kind == .symlink {
                    outcomes.append(ItemOutcome(path: display(path), error: FileProviderError(.notSupported, "a symlink to \(target.symlinkTarget ?? "?"); symlinks stay placeholders and are never followed")))
                } else {
                    files.append(target)
                }
            } catch {
                outcomes.append(ItemOutcome(path: display(path), error: error))
            }
        }
        // The folders are made first and populated after the downloads: a file about to be
        // downloaded then never gets a placeholder just to have it replaced (two new files on
        // disk per download instead of one; on a busy ext4 creating them cost as much as the
        // downloads). Populating adopts what was downloaded and writes placeholders for the rest.
        let parents = folders + files.map { Self.split($0.path).parent }
        do {
            try await makeFolders(parents)
        } catch {
            return outcomes + files.map { ItemOutcome(path: display($0.path), error: error) }
        }
        outcomes += await download(files, events: events)
        do {
            try await populateFolders(parents)
        } catch {
            outcomes.append(ItemOutcome(path: display(parents.first ?? ""), error: error))
        }
        return outcomes
    }

    /// Makes these folders (relative paths) and the ones above them in the replica, so files
    /// can be downloaded into them; their records are not changed (a dataless folder stays
    /// dataless until it is populated).
    /// - Throws: `localIOFailure` naming the folder that could not be made.
    private func makeFolders(_ paths: [String]) async throws(FileProviderError) {
        let replica = self.replica
        let all = Set(paths.flatMap { path -> [String] in
            var prefixes: [String] = []
            var current = path
            while !current.isEmpty {
                prefixes.append(current)
                current = Self.split(current).parent
            }
            return prefixes
        }).sorted { $0.utf8.count < $1.utf8.count }
        try await executor.run {
            for path in all { try replica.makeFolder(path) }
        }
    }

    /// Downloads files that are not materialized or are outdated, `downloadDepth` at a time, and
    /// records them in batches.
    func download(_ records: [ItemRecord], events: EventHandler?) async -> [ItemOutcome] {
        let replica = self.replica
        // A file recorded as materialized but missing (an evict interrupted after the file went)
        // is downloaded again.
        var seen = Set<ItemIdentifier>()
        let unique = records.filter { seen.insert($0.identifier).inserted }
        let pending = (try? await executor.run {
            unique.filter { $0.state != .materialized || $0.isOutdated || replica.fingerprint(atPath: replica.path($0.path)) == nil }
        }) ?? unique
        if pending.isEmpty { return [] }
        // Sizes come from the store: added without overflow, whatever they are.
        let totalBytes = pending.reduce(Int64(0)) { total, record in
            let (sum, overflow) = total.addingReportingOverflow(max(0, record.size))
            return overflow ? .max : sum
        }
        let counters = Mutex((bytes: Int64(0), items: 0))
        let checkpoints = (try? store.checkpoints(domainID: domainID)) ?? [:]
        let report: @Sendable (Int64, Bool) -> Void = { delta, finished in
            let now = counters.withLock { value -> (Int64, Int) in
                value.bytes += delta
                if finished { value.items += 1 }
                return (value.bytes, value.items)
            }
            events?(.transfer(completedBytes: now.0, totalBytes: totalBytes, completedItems: now.1, totalItems: pending.count))
        }
        var outcomes: [ItemOutcome] = []
        var finished: [ItemRecord] = []
        await withTaskGroup(of: (ItemRecord, Result<ItemRecord, FileProviderError>).self) { group in
            var iterator = pending.makeIterator()
            var running = 0
            func startNext() -> Bool {
                guard let record = iterator.next() else { return false }
                group.addTask { [self] in
                    do {
                        return (record, .success(try await self.downloadShared(record, checkpoint: checkpoints[record.identifier], report: report)))
                    } catch {
                        return (record, .failure(FileProviderError.wrap(error)))
                    }
                }
                return true
            }
            while running < downloadDepth, startNext() { running += 1 }
            while let (record, result) = await group.next() {
                running -= 1
                switch result {
                case .success(let updated):
                    finished.append(updated)
                    outcomes.append(ItemOutcome(path: display(record.path), error: nil))
                case .failure(let error):
                    outcomes.append(ItemOutcome(path: display(record.path), error: error))
                }
                if finished.count >= 500 {
                    if let error = flush(&finished) { outcomes.append(ItemOutcome(path: display(""), error: error)) }
                }
                if startNext() { running += 1 }
            }
        }
        if let error = flush(&finished) { outcomes.append(ItemOutcome(path: display(""), error: error)) }
        return outcomes
    }

    private func flush(_ records: inout [ItemRecord]) -> FileProviderError? {
        defer { records.removeAll(keepingCapacity: true) }
        do {
            try store.apply(domainID: domainID, upserts: records, deletions: [])
        } catch {
            return error
        }
        // Now that the database says materialized, later requests need no shared task.
        let done = records.map(\.identifier)
        downloads.withLock { map in
            for identifier in done { map.removeValue(forKey: identifier) }
        }
        return nil
    }

    /// Downloads one file; concurrent requests for the same item share one download.
    func downloadShared(_ record: ItemRecord, checkpoint: TransferCheckpoint?, report: @escaping @Sendable (Int64, Bool) -> Void)
        async throws -> ItemRecord
    {
        // A download that finished stays in `downloads` until its batch is recorded, so no request
        // can fall between the two and download the item again.
        var task = downloads.withLock { $0[record.identifier] }
        if task == nil {
            if let current = try store.item(domainID: domainID, identifier: record.identifier), current.state == .materialized,
                !current.isOutdated, replica.fingerprint(atPath: replica.path(current.path)) != nil
            {
                return current
            }
            task = downloads.withLock { map -> Task<ItemRecord, any Error> in
                if let running = map[record.identifier] { return running }
                let identifier = record.identifier
                let task = Task { [self] in
                    do {
                        return try await self.performDownload(record, checkpoint: checkpoint, report: report)
                    } catch {
                        _ = self.downloads.withLock { $0.removeValue(forKey: identifier) }
                        throw error
                    }
                }
                map[identifier] = task
                return task
            }
        }
        guard let task else { throw FileProviderError(.localIOFailure, "no download task") }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Files at least this large get a checkpoint before their download starts.
    static let checkpointThreshold: Int64 = 4 << 20

    /// The name of an item's staging file.
    func stagingName(for identifier: ItemIdentifier) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in identifier.rawValue.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return String(hash, radix: 16) + ".part"
    }

    private func performDownload(_ record: ItemRecord, checkpoint: TransferCheckpoint?, report: @escaping @Sendable (Int64, Bool) -> Void)
        async throws(FileProviderError) -> ItemRecord
    {
        let replica = self.replica
        let staging = replica.stagingPath(named: stagingName(for: record.identifier))
        var offset: Int64 = 0
        if let checkpoint, checkpoint.contentVersion == record.contentVersion, backend.capabilities.supportsRangedReads {
            // Recorded before staging files went into 16 folders: the file moves over, so the
            // download still resumes and nothing stays behind at the old place.
            if checkpoint.stagingPath != staging {
                try? await executor.run { try replica.moveStagingFile(from: checkpoint.stagingPath, to: staging) }
            }
            offset = replica.fileSize(atPath: staging) ?? 0
        }
        let resumeFrom = offset
        // Large downloads leave a checkpoint first, so even a killed process resumes.
        if checkpoint == nil, backend.capabilities.supportsRangedReads, record.size >= Self.checkpointThreshold {
            try store.saveCheckpoint(
                TransferCheckpoint(
                    domainID: domainID, identifier: record.identifier.rawValue, contentVersion: record.contentVersion,
                    stagingPath: staging, bytesTransferred: 0, totalBytes: record.size))
        }
        try await executor.run { try replica.prepareStagingFile(atPath: staging, truncate: resumeFrom == 0) }
        let progressBase = Mutex(Int64(0))
        let item: Item
        do {
            item = try await backend.fetchContents(
                for: record.identifier, version: nil, to: URL(fileURLWithPath: staging), offset: offset,
                progress: { completed, _ in
                    let delta = progressBase.withLock { last -> Int64 in
                        defer { last = completed }
                        return completed - last
                    }
                    if delta > 0 { report(delta, false) }
                })
        } catch {
            let done = replica.fileSize(atPath: staging) ?? 0
            if done > 0 && backend.capabilities.supportsRangedReads {
                try? store.saveCheckpoint(
                    TransferCheckpoint(
                        domainID: domainID, identifier: record.identifier.rawValue, contentVersion: record.contentVersion,
                        stagingPath: staging, bytesTransferred: done, totalBytes: record.size))
            } else {
                try? replica.removeFile(atPath: staging)
            }
            throw error
        }
        var updated = record
        let path = record.path
        updated.update(from: item, path: path)
        let expected = item.size
        let stored = record
        let print = try await executor.run { [self] () throws -> FileFingerprint in
            guard let size = replica.fileSize(atPath: staging), size == expected else {
                try? replica.removeFile(atPath: staging)
                throw FileProviderError(.corruptData, "the download of \(display(path)) was \(replica.fileSize(atPath: staging) ?? 0) bytes, expected \(expected); try again")
            }
            if let date = item.contentModificationDate { try replica.setModificationDate(date, atPath: staging) }
            let target = replica.path(path)
            // From here on, whatever fails, the staging file does not stay behind.
            var placed = false
            defer { if !placed { try? replica.removeFile(atPath: staging) } }
            if let existing = replica.fingerprint(atPath: target) {
                let ours = stored.state == .materialized && !hasLocalChanges(stored, existing)
                // A download renamed into place by a process that died before recording it: same
                // size and exactly the date this download just gave its staging file.
                let dated = item.contentModificationDate != nil ? replica.fingerprint(atPath: staging) : nil
                let sameAsDownload = existing.isRegularFile && existing.size == expected
                    && dated.map { $0.modificationNanos == existing.modificationNanos } == true
                guard ours || sameAsDownload else {
                    try? replica.removeFile(atPath: staging)
                    if stored.state == .materialized {
                        throw FileProviderError(
                            .unsyncedEdits, "\(target) has local changes, so the store's newer version was not downloaded over it; nothing was lost")
                    }
                    throw FileProviderError(.cannotSynchronize, "a local file is in the way at \(target); move it elsewhere and materialize again")
                }
                try replica.replace(fromPath: staging, toPath: target)
            } else {
                try replica.move(fromPath: staging, toPath: target)
            }
            placed = true
            try replica.removeFile(atPath: replica.placeholderPath(path))
            guard let print = replica.fingerprint(atPath: target) else {
                throw FileProviderError(.localIOFailure, "\(target) vanished right after it was written")
            }
            return print
        }
        if checkpoint != nil || resumeFrom > 0 || record.size >= Self.checkpointThreshold { try? store.removeCheckpoint(domainID: domainID, identifier: record.identifier) }
        updated.markMaterialized(contentVersion: item.version.content, fingerprint: print)
        updated.lastError = nil
        report(0, true)
        return updated
    }
}
