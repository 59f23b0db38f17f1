import Foundation
import ProviderCore
import ProviderStore

/// A local change the store does not have yet: what the next sync would send, found by a scan
/// of the replica against the database, or an operation the journal holds unfinished.
public struct UnsentChange: Sendable, Codable, Hashable {
    /// What changed, named as `fileproviderctl why` names an item's local change.
    public enum Kind: String, Sendable, Codable {
        /// A file or folder new in the replica (also one made inside a folder that was not
        /// populated yet).
        case created
        /// A downloaded file changed since it was downloaded.
        case edited
        /// A file written at the real name of an item that was not downloaded.
        case overwrotePlaceholder
        /// An item moved or renamed in the replica (``UnsentChange/from`` is where it was).
        case moved
        /// An item (a folder with everything in it) deleted from the replica.
        case deleted
        /// An operation of the journal that did not finish (pending, interrupted or failed)
        /// and that no change of the scan stands for: nothing in the replica is behind it any
        /// more (the item was changed back, or the change went with a folder's).
        case unfinished
    }

    /// Whether deleting the replica would lose this change: all but ``Kind/unfinished``.
    public var losesWork: Bool { kind != .unfinished }

    /// The item's path in the domain, starting with `/` (its new place for a move).
    public var path: String
    public var kind: Kind
    /// Where a moved item was, starting with `/`.
    public var from: String?
    /// `file` or `folder`.
    public var itemKind: String?
    /// The journal's unfinished operation on the item, when there is one: an earlier attempt
    /// to send this change that failed or was interrupted.
    public var operation: ItemExplanation.Operation?
    /// The above in a sentence.
    public var reason: String

    public init(
        path: String, kind: Kind, from: String? = nil, itemKind: String? = nil, operation: ItemExplanation.Operation? = nil,
        reason: String
    ) {
        self.path = path
        self.kind = kind
        self.from = from
        self.itemKind = itemKind
        self.operation = operation
        self.reason = reason
    }
}

extension ProviderManager {
    /// What the next sync of a domain would send to its store, without sending anything and
    /// without changing the replica or the database: a scan of the replica against the database
    /// (as sync's own, with no settle time: a file still being written counts) plus the
    /// journal's unfinished operations. An unfinished operation that a change of the scan
    /// stands for is attached to that change. Works offline; the store is not contacted.
    ///
    /// What is inside a folder that was never populated (dataless) is compared too: a file made
    /// there is `created`, a download an interrupted `materialize` left there is not a change.
    ///
    /// Sorted by path. Names the ignore rules leave out (editors' temporary files, the domain's
    /// own patterns) are never sent and are not listed.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `providerDomainTemporarilyUnavailable`
    ///   while a conversion of its replica mode is unfinished; `localIOFailure` when the
    ///   database fails; `cancelled` when the task is cancelled.
    public func unsentChanges(inDomain name: String) async throws(FileProviderError) -> [UnsentChange] {
        try await PoolCheck.during("unsent changes") { () async throws(FileProviderError) -> [UnsentChange] in
            try await findingUnsentChanges(inDomain: name)
        }
    }

    private func findingUnsentChanges(inDomain name: String) async throws(FileProviderError) -> [UnsentChange] {
        let domain = try await blocking { [self] () throws(FileProviderError) in try self.domain(named: name) }
        try checkNoUnfinishedConversion(name)
        guard let domainID = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(domain.name) has no id") }
        let replica = Replica(
            root: try replicaRoot(of: domain), staging: home.appendingPathComponent("staging/\(domainID)"),
            layout: ReplicaLayouts.layout(of: domain))
        var scanner = LocalScanner(replica: replica, domain: domain.name, ignore: IgnoreRules(extra: domain.ignoreList), settleNanos: 0)
        // Every change is listed (the list is the answer): no partial scans here.
        scanner.findingsLimit = .max
        // A chmod is a change where the store keeps the bit (as sync's own scan compares).
        scanner.comparesFlags = keepsFileSystemFlags(domain)
        // A replica that is gone has sent nothing and would send nothing: a sync refuses it.
        let (name, store) = (domain.name, self.store)
        try await executor.run {
            try replica.checkRoot(domain: name, knowsItems: try store.itemCount(domainID: domainID) > 1)
        }
        // Folders never populated that hold something: compared as if the database did not know
        // them, so what is in them shows as new (sync populates them first, then compares).
        var records = StoreScanRecords(store: store, domainID: domainID)
        var changes: [LocalChange] = []
        for _ in 0..<4 {
            let compared = records
            let result = try await executor.run { [scanner] in try scanner.scan(compared) }
            if result.occupiedDataless.isEmpty {
                changes = result.changes
                break
            }
            records.forgotten += result.occupiedDataless
        }

        var unsent: [UnsentChange] = []
        var keys: [String: Int] = [:]
        // Telling a download from a new file reads its mark: blocking.
        let found = changes
        let folders = records.forgotten
        let described = try await executor.run {
            found.compactMap { change in
                Self.describe(change, unpopulated: folders, replica: replica) { path in
                    try? store.item(domainID: domainID, path: path)
                }
            }
        }
        for (entry, key) in described {
            keys[key] = unsent.count
            unsent.append(entry)
        }
        let (unfinished, excluded) = try await executor.run {
            (try store.unfinishedOperations(domainID: domainID), try store.excludedItems(domainID: domainID))
        }
        for entry in unfinished {
            let operation = ItemExplanation.Operation(
                operation: entry.operation, state: entry.state.rawValue, attempts: entry.attempts, lastError: entry.lastError,
                since: entry.createdAt)
            let what = Self.describe(operation)
            if let index = keys[entry.templateIdentifier], unsent[index].operation == nil {
                unsent[index].operation = operation
                unsent[index].reason += "; \(what)"
                continue
            }
            let payload = (try? JSONSerialization.jsonObject(with: Data(entry.payload.utf8))) as? [String: Any]
            let path = (payload?["to"] as? String) ?? (payload?["path"] as? String) ?? ""
            unsent.append(
                UnsentChange(
                    path: "/" + path, kind: .unfinished, from: (payload?["from"] as? String).map { "/" + $0 },
                    itemKind: payload?["kind"] as? String, operation: operation, reason: what))
        }
        unsent = Self.markingExcluded(unsent, excluded)
        return unsent.enumerated().sorted { a, b in
            a.element.path != b.element.path ? a.element.path < b.element.path : a.offset < b.offset
        }.map(\.element)
    }

    /// A change of the scan as an ``UnsentChange`` with the journal key its operation would
    /// have; `nil` for what is not a change (a folder or a download in a folder never populated).
    /// - Parameter known: the database's record at a path, asked for paths at or below a folder of
    ///   `unpopulated`.
    private static func describe(
        _ change: LocalChange, unpopulated: [String], replica: Replica, known: (String) -> ItemRecord?
    ) -> (UnsentChange, String)? {
        let later = "not sent to the store yet (the next sync sends it)"
        switch change {
        case .created(let path, let kind, let fingerprint):
            let holder = unpopulated.filter { $0.isEmpty || path.hasPrefix($0 + "/") }.max { $0.utf8.count < $1.utf8.count }
            if StoreScanRecords.isForgotten(path, forgotten: unpopulated), let known = known(path) {
                // The folder itself, a folder below it, or a file a materialize downloaded
                // before it populated the folder: the database's own items.
                if known.kind == .folder && kind == .folder { return nil }
                if kind == .file && DownloadMark.downloadedVersion(of: known, fingerprint, in: replica) != nil { return nil }
            }
            var reason = "new in the replica; \(later)"
            if let holder {
                reason =
                    "new in the replica inside /\(holder), a folder that was not populated yet; \(later), once the folder is populated"
            }
            return (UnsentChange(path: "/" + path, kind: .created, itemKind: kind.rawValue, reason: reason), "create:\(path)")
        case .modified(let record, _):
            return (
                UnsentChange(
                    path: "/" + record.path, kind: .edited, itemKind: record.kind.rawValue,
                    reason: "changed locally since it was downloaded; \(later)"),
                "modify:\(record.identifier.rawValue)"
            )
        case .flagsChanged(let record, _):
            return (
                UnsentChange(
                    path: "/" + record.path, kind: .edited, itemKind: record.kind.rawValue,
                    reason: "its executable bit was changed locally; \(later)"),
                "modify:\(record.identifier.rawValue)"
            )
        case .writtenOverPlaceholder(let record, _) where replica.writesAtAnItemsNameEditIt:
            return (
                UnsentChange(
                    path: "/" + record.path, kind: .edited, itemKind: record.kind.rawValue,
                    reason: "replaced locally (emptied or renamed over by a program); \(later)"),
                "modify:\(record.identifier.rawValue)"
            )
        case .writtenOverPlaceholder(let record, _):
            return (
                UnsentChange(
                    path: "/" + record.path, kind: .overwrotePlaceholder, itemKind: record.kind.rawValue,
                    reason:
                        "a file was written at its name without its contents being downloaded; the next sync keeps both (the store's version keeps the name, the file goes up as a conflicted copy)"
                ),
                "create:\(record.path)"
            )
        case .moved(let record, let to, _):
            return (
                UnsentChange(
                    path: "/" + to, kind: .moved, from: "/" + record.path, itemKind: record.kind.rawValue,
                    reason: "moved here from /\(record.path); \(later)"),
                "move:\(record.identifier.rawValue)"
            )
        case .deleted(let record):
            let what =
                switch record.kind {
                case .folder: "deleted locally, with everything in it"
                case .file where record.state == .materialized: "deleted locally"
                default: "its placeholder was removed locally"
                }
            return (
                UnsentChange(path: "/" + record.path, kind: .deleted, itemKind: record.kind.rawValue, reason: "\(what); \(later)"),
                "delete:\(record.identifier.rawValue)"
            )
        }
    }

    /// A journal operation in words, for `why` and ``unsentChanges(inDomain:)``.
    static func describe(_ operation: ItemExplanation.Operation) -> String {
        let what: String
        switch operation.state {
        case JournalState.failed.rawValue:
            what = "\(operation.operation) refused by the store (nothing was done; the next sync sends it again)"
        case JournalState.running.rawValue: what = "interrupted \(operation.operation) in the journal (replayed by the next sync)"
        default: what = "pending \(operation.operation) in the journal (retried by the next sync)"
        }
        var line = "\(what), \(operation.attempts) attempt\(operation.attempts == 1 ? "" : "s")"
        if let error = operation.lastError { line += "; last error: \(error)" }
        return line
    }
}
