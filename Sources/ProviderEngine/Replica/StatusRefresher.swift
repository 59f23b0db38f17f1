import Foundation
import ProviderCore
import ProviderStore

/// Rewrites the status attributes (``ReplicaStatus``) of a subtree whose content policy
/// changed, as the database has it now: `pin` and `unpin` (``PolicySetter``), and an item the
/// store moved into a pinned folder or out of one (sync down, once the pass has written the new
/// paths).
///
/// Each downloaded file at or below a path says `pinned` or `downloaded`
/// (``ReplicaStatus/markDownloaded(_:in:domain:store:domainID:)``, in every layout), and each
/// folder there its ``FolderStatus`` (where the layout writes folders' status). A file whose
/// status says it has changes not sent, or is a conflicted copy, keeps it. Each value is written
/// only when it differs. Pages of 500 records, each through the executor. Failures leave a
/// status as it was (it is a convenience, not state).
struct StatusRefresher: Sendable {
    let context: DomainContext

    /// Records read and written per job on the executor.
    static let pageSize = 500

    /// Refreshes the statuses at and below each of `paths` (a folder: everything below it).
    func refresh(subtreesAt paths: [String]) async {
        let (store, domainID, replica, domain, executor) = (
            context.store, context.domainID, context.replica, context.domain.name, context.executor
        )
        for path in paths {
            var after: String?
            var first = true
            while true {
                let (start, withItself) = (after, first)
                let page: [ItemRecord]? = try? await executor.run { () throws(FileProviderError) -> [ItemRecord] in
                    var records = try store.descendants(domainID: domainID, of: path, after: start, limit: Self.pageSize)
                    if withItself, let own = try store.item(domainID: domainID, path: path) { records.append(own) }
                    for record in records where record.kind == .folder {
                        FolderStatus.write(record, in: replica, domain: domain, store: store, domainID: domainID)
                    }
                    for record in records where record.kind == .file && record.state == .materialized {
                        let current = ReplicaStatus.read(atPath: replica.path(record.path))
                        if current == .unsent || current == .conflict { continue }
                        ReplicaStatus.markDownloaded(record, in: replica, domain: domain, store: store, domainID: domainID)
                    }
                    return records
                }
                first = false
                let below = page?.filter { $0.path != path } ?? []
                guard let last = below.last, below.count == Self.pageSize else { break }
                after = last.path
            }
        }
    }

    /// `paths` without those below another of them (refreshed with it), each once, in order.
    static func tops(of paths: [String]) -> [String] {
        let all = Set(paths)
        if all.contains("") { return [""] }
        var seen = Set<String>()
        return paths.filter { path in
            var parent = RelativePath(path).parent
            while !parent.isEmpty {
                if all.contains(parent) { return false }
                parent = RelativePath(parent).parent
            }
            return seen.insert(path).inserted
        }
    }
}
