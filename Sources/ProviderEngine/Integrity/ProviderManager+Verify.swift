import Foundation
import ProviderCore
import ProviderStore

extension ProviderManager {
    /// Hashes the downloaded files of every domain (or of `scope`: one domain, or one folder or
    /// file of it) again and compares them with the hashes recorded when they were downloaded
    /// or uploaded, and with the store's own hash where it gave one. Offline: the database and
    /// the replica only, the store is not contacted and nothing is changed.
    ///
    /// A file whose size, modification time or inode is not the recorded one is an edit no sync
    /// has sent (``IntegrityProblem/Kind/unsentEdit``, not read); one that has them but other
    /// bytes is ``IntegrityProblem/Kind/bitRot``; one whose store hash is not the hash of the
    /// bytes downloaded is ``IntegrityProblem/Kind/storeHashDiffers``. Files are read on a
    /// thread of their own, one at a time; `progress` is called after each file. Dataless
    /// domains are read in their backing folder, never through the guarded replica.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `noSuchItem` when the database
    ///   has no item at the scope's path; `providerDomainTemporarilyUnavailable` while a
    ///   conversion of the domain's replica mode is unfinished; `localIOFailure` when the
    ///   database fails; `cancelled` when the task is cancelled.
    public func verify(
        _ scope: ItemLocation? = nil, progress: (@Sendable (VerifyProgress) -> Void)? = nil
    ) async throws(FileProviderError) -> VerifyReport {
        let store = self.store
        let targets: [(DomainRecord, String)] = try await blocking { [self] () throws(FileProviderError) in
            guard let scope else { return try self.domains().sorted { $0.name < $1.name }.map { ($0, "") } }
            let domain = try self.domain(named: scope.domain)
            if !scope.path.isEmpty, let id = domain.id, try store.item(domainID: id, path: scope.path) == nil {
                throw FileProviderError(
                    .noSuchItem, "no item at \(scope.description); run 'fileproviderctl sync \(scope.domain)' to refresh")
            }
            return [(domain, scope.path)]
        }
        let reader = BlockingExecutor(name: "verify", threads: 1)
        defer { reader.shutDown() }
        var report = VerifyReport()
        for (domain, below) in targets {
            try checkNoUnfinishedConversion(domain.name)
            guard let domainID = domain.id else { continue }
            let replica = Replica(
                root: try replicaRoot(of: domain), staging: home.appendingPathComponent("staging/\(domainID)"),
                layout: ReplicaLayouts.layout(of: domain))
            let totals = try await blocking { () throws(FileProviderError) in
                try store.downloadedFileTotals(domainID: domainID, below: below)
            }
            var filter = ItemFilter()
            filter.downloaded = true
            filter.kinds = [.file]
            filter.below = below
            let downloaded = filter
            let checker = IntegrityCheck(domain: domain.name, replica: replica)
            var done = VerifyProgress(files: 0, totalFiles: totals.files, bytes: 0, totalBytes: totals.bytes, domain: domain.name)
            progress?(done)
            var cursor: SearchCursor?
            while true {
                if Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
                let after = cursor
                let page = try await blocking { () throws(FileProviderError) in
                    try store.searchPage(domainID: domainID, filter: downloaded, after: after, limit: 256)
                }
                guard let last = page.last else { break }
                cursor = SearchCursor(last)
                for record in page {
                    if Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
                    let outcome = try await reader.run { checker.check(record) }
                    report.files += 1
                    report.bytesRead += outcome.bytesRead
                    switch outcome.verdict {
                    case .verified: report.verified += 1
                    case .unhashed: report.unhashed += 1
                    case .skipped: break
                    }
                    report.problems += outcome.problems
                    done.files += 1
                    done.bytes += record.size
                    progress?(done)
                }
                if page.count < 256 { break }
            }
        }
        return report
    }
}
