import Foundation
import ProviderCore
import ProviderStore

/// What ``ReplicaAdoption`` found in a kept replica folder.
public struct AdoptionSummary: Sendable, Hashable, Codable {
    /// Files recorded as downloaded: same size and modification time as the store's item.
    public var files = 0
    /// Bytes of those files.
    public var bytes: Int64 = 0
    /// Folders recorded.
    public var folders = 0
    /// Files at the name of a store item that differ from it (size or date): the first sync
    /// keeps both, the local one under a new name.
    public var differing = 0

    public init() {}
}

/// Takes over a replica folder kept by `domain remove --keep-replica` (or any folder holding
/// files of the store) for a new domain, so its first sync neither downloads the files again nor
/// uploads them as new ones.
///
/// Walks the store from its root, folder by folder, only into folders the replica has too. A
/// regular file of the replica at an item's path with the item's size and modification time (to
/// within a second, as a download sets it: rsync's quick check) is recorded as the downloaded
/// item, with the file's fingerprint; a folder at a folder's path is recorded as that folder.
/// Everything else is left to the first sync, which treats it as it treats any replica: a store
/// item with nothing at its path gets a placeholder, a different file at its path is kept beside
/// it under a new name (`b 2.txt`), a file the store does not have is uploaded. Nothing is moved, written
/// or deleted in the replica or the store here.
struct ReplicaAdoption {
    let backend: CheckedBackend
    let replica: Replica
    let store: MetadataStore
    let domainID: Int64
    let executor: BlockingExecutor

    /// The most records written in one transaction.
    static let batchSize = 2000

    /// - Throws: what the backend's listing throws; `localIOFailure` when the database fails.
    func run() async throws(FileProviderError) -> AdoptionSummary {
        var summary = AdoptionSummary()
        var folders: [(identifier: ItemIdentifier, path: String)] = [(.rootContainer, "")]
        var batch: [ItemRecord] = []
        while let folder = folders.popLast() {
            let listing = try await backend.listAllItems(in: folder.identifier)
            let replica = self.replica
            let local = try await executor.run { () -> [String: FileFingerprint] in
                var found: [String: FileFingerprint] = [:]
                for item in listing.items where Filename.isValid(item.filename) {
                    let relative = folder.path.isEmpty ? item.filename : folder.path + "/" + item.filename
                    if let print = replica.fingerprint(atPath: replica.path(relative)) { found[item.filename] = print }
                }
                return found
            }
            for item in listing.items where Filename.isValid(item.filename) {
                guard let print = local[item.filename] else { continue }
                let path = folder.path.isEmpty ? item.filename : folder.path + "/" + item.filename
                switch item.kind {
                case .folder where print.isDirectory:
                    batch.append(ItemRecord(domainID: domainID, item: item, path: path))
                    folders.append((item.identifier, path))
                    summary.folders += 1
                case .file where print.isRegularFile:
                    guard Self.matches(item, print) else {
                        summary.differing += 1
                        continue
                    }
                    var record = ItemRecord(domainID: domainID, item: item, path: path)
                    record.markMaterialized(contentVersion: item.version.content, fingerprint: print)
                    batch.append(record)
                    summary.files += 1
                    summary.bytes += print.size
                case .file:
                    summary.differing += 1
                default:
                    continue
                }
                if batch.count >= Self.batchSize {
                    try await save(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        try await save(batch)
        return summary
    }

    /// Writes records in one transaction, on the executor (SQLite blocks).
    private func save(_ records: [ItemRecord]) async throws(FileProviderError) {
        let store = self.store
        let domainID = self.domainID
        try await executor.run { try store.apply(domainID: domainID, upserts: records, deletions: []) }
    }

    /// Whether a local file is the item's contents as a download leaves them: the same size and
    /// a modification time within a second of the item's.
    static func matches(_ item: Item, _ print: FileFingerprint) -> Bool {
        guard print.size == item.size, let date = item.contentModificationDate else { return false }
        let local = Double(print.modificationNanos) / 1_000_000_000
        return abs(local - date.timeIntervalSince1970) < 1
    }
}
