import Foundation
import ProviderCore
import ProviderStore

/// The replica side of items: their placeholders and local copies written, moved and removed
/// as the database changes (sync down, populating a folder).
extension DomainContext {
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
            if old.state == .materialized { DownloadMark.carry(old, atPath: old.path, to: new.identifier, in: replica) }
            try replica.move(fromPath: source, toPath: target)
        case .placeholder, .symlink:
            try replica.writePlaceholder(new.path, PlaceholderMetadata(domain: domain.name, record: new))
            if old.path != new.path { try replica.removePlaceholder(old.path) }
        }
    }

    /// Removes an item's local copy. Returns true when a materialized file was kept because it
    /// changed locally. Another item's placeholder at the item's path (a store that replaced
    /// the item: the new one's was written there) is not the item's, and stays. Blocking; runs
    /// on the executor.
    func removeLocalCopy(of record: ItemRecord) throws(FileProviderError) -> Bool {
        switch record.state {
        case .placeholder, .symlink:
            if let owner = replica.placeholderOwner(record.path), !owner.isOwned(by: record.identifier) { return false }
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
