import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// Drops downloaded contents (`stopProvidingItem`): each materialized file is swapped for its
    /// placeholder atomically. Folders stand for the files below them.
    ///
    /// Refuses, per item, with `nonEvictable` for pinned items (or items in a pinned folder)
    /// and `unsyncedEdits` for files changed locally; never throws. When the task is cancelled,
    /// the files evicted so far are recorded and every other one gets a `cancelled` outcome.
    public func evict(paths: [String], recursive: Bool) async -> [ItemOutcome] {
        var outcomes: [ItemOutcome] = []
        var updated: [ItemRecord] = []
        for path in paths {
            if Task.isCancelled {
                outcomes.append(ItemOutcome(path: display(path), error: Self.notStarted))
                continue
            }
            do {
                let target = try record(at: path)
                if let holder = try pinHolder(of: target) { throw pinnedError(path, holder: holder) }
                var files = [target]
                if target.kind == .folder {
                    files =
                        (recursive
                        ? try store.descendants(domainID: domainID, of: path)
                        : try store.children(domainID: domainID, parent: target.identifier))
                        .filter { $0.kind == .file }
                }
                let pinnedFolders = target.kind == .folder ? try pinnedFolderPaths() : []
                for file in files where file.state == .materialized {
                    if Task.isCancelled {
                        outcomes.append(ItemOutcome(path: display(file.path), error: Self.notStarted))
                        continue
                    }
                    do {
                        if let holder = Self.pinHolder(of: file, pinnedFolders: pinnedFolders) {
                            throw pinnedError(file.path, holder: holder)
                        }
                        updated.append(try await evictFile(file))
                        outcomes.append(ItemOutcome(path: display(file.path), error: nil))
                    } catch {
                        outcomes.append(ItemOutcome(path: display(file.path), error: FileProviderError.wrap(error)))
                    }
                }
                if target.kind == .file && target.state != .materialized {
                    outcomes.append(ItemOutcome(path: display(path), error: nil))
                }
            } catch {
                outcomes.append(ItemOutcome(path: display(path), error: FileProviderError.wrap(error)))
            }
        }
        do {
            try store.apply(domainID: domainID, upserts: updated, deletions: [])
        } catch {
            outcomes.append(ItemOutcome(path: display(""), error: error))
        }
        return outcomes
    }

    /// The path of the item that holds an item's pin: the outermost pinned folder above it (whose
    /// unpin clears every pin below), else the item itself when it is pinned, else `nil`.
    func pinHolder(of record: ItemRecord) throws(FileProviderError) -> String? {
        Self.pinHolder(of: record, pinnedFolders: try pinnedFolderPaths())
    }

    /// ``pinHolder(of:)`` with the domain's pinned folders given.
    static func pinHolder(of record: ItemRecord, pinnedFolders: [String]) -> String? {
        let above = pinnedFolders.filter { $0 != record.path && ($0.isEmpty || record.path.hasPrefix($0 + "/")) }
        if let outermost = above.min(by: { $0.utf8.count < $1.utf8.count }) { return outermost }
        return record.isPinned ? record.path : nil
    }

    /// The refusal to evict a pinned item, naming the item whose pin to remove.
    private func pinnedError(_ path: String, holder: String) -> FileProviderError {
        let through = holder == path ? "" : " through \(display(holder))"
        return FileProviderError(
            .nonEvictable, "\(display(path)) is pinned\(through); unpin it with 'fileproviderctl unpin \(display(holder))'")
    }

    private func evictFile(_ record: ItemRecord) async throws(FileProviderError) -> ItemRecord {
        var updated = record
        updated.markPlaceholder()
        let metadata = PlaceholderMetadata(domain: domain.name, record: updated)
        let replica = self.replica
        try await executor.run { [self] in
            let path = replica.path(record.path)
            if let print = replica.fingerprint(atPath: path) {
                if replica.hasLocalChanges(record, print) {
                    throw FileProviderError(
                        .unsyncedEdits, "\(display(record.path)) has local changes that are not uploaded; nothing was evicted")
                }
            }
            try replica.replaceWithPlaceholder(record.path, metadata)
        }
        return updated
    }

    /// Pins items (keeps them downloaded, as Apple's "keep downloaded"): sets the pin and
    /// materializes the files, for a folder every file below it, now and after later syncs.
    public func pin(paths: [String], events: EventHandler? = nil) async -> [ItemOutcome] {
        var outcomes: [ItemOutcome] = []
        var toMaterialize: [String] = []
        for path in paths {
            do {
                var target = try record(at: path)
                target.isPinned = true
                try store.save(target)
                if target.kind != .symlink { toMaterialize.append(path) }
            } catch {
                outcomes.append(ItemOutcome(path: display(path), error: error))
            }
        }
        return outcomes + (await materialize(paths: toMaterialize, recursive: true, events: events))
    }

    /// Removes pins from items and everything below them; contents stay until evicted.
    public func unpin(paths: [String]) -> [ItemOutcome] {
        var outcomes: [ItemOutcome] = []
        for path in paths {
            do {
                let target = try record(at: path)
                var changed = [target] + (target.kind == .folder ? try store.descendants(domainID: domainID, of: path) : [])
                changed = changed.filter(\.isPinned).map { record in
                    var record = record
                    record.isPinned = false
                    return record
                }
                try store.apply(domainID: domainID, upserts: changed, deletions: [])
                outcomes.append(ItemOutcome(path: display(path), error: nil))
            } catch {
                outcomes.append(ItemOutcome(path: display(path), error: error))
            }
        }
        return outcomes
    }

    /// Counts of the domain's items by state.
    public func summary() throws(FileProviderError) -> ItemSummary { try store.summary(domainID: domainID) }
}
