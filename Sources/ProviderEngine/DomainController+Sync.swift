import Foundation
import ProviderCore
import ProviderStore

/// Where a sync's time went, in seconds.
public struct SyncPhases: Codable, Sendable {
    public var listing = 0.0
    public var replica = 0.0
    public var database = 0.0
    public var downloads = 0.0
    public var upload = 0.0
    public init() {}
}

/// What a sync did.
public struct SyncReport: Codable, Sendable {
    public var domain: String
    public var listedItems = 0
    public var added = 0
    public var updated = 0
    public var moved = 0
    public var deleted = 0
    public var downloaded = 0
    /// Local creations, edits, moves and deletions sent to the store.
    public var uploaded = 0
    /// Conflicts resolved by keeping both versions (see `fileproviderctl conflicts`).
    public var conflicts = 0
    /// Local files still being written, left for the next sync.
    public var pendingLocal: [String] = []
    /// Items left as they were, with why (an unsafe name, local changes kept, an error).
    public var notices: [String] = []
    public var seconds = 0.0
    /// Time spent listing the store, changing the replica, and writing the database.
    public var phases = SyncPhases()

    public init(domain: String) { self.domain = domain }
}

extension DomainController {
    /// One folder listed during the walk.
    private struct Listing: Sendable {
        var folderPath: String
        var result: Result<[Item], FileProviderError>
        var folder: ItemIdentifier
    }

    /// An item seen in the store, with its place in the replica.
    struct RemoteEntry {
        var item: Item
        var path: String
    }

    /// Brings the replica and the database up to date with the store: new items become
    /// placeholders or folders, changed placeholders are rewritten, materialized files whose
    /// contents changed are downloaded again, moved items are moved, deleted items are removed
    /// (a materialized file with local changes is kept), pinned items are materialized.
    ///
    /// One bad item never stops the rest: it is reported in the notices.
    ///
    /// A failure of the whole domain is recorded on it (`lastError`); when the failure's code
    /// backs the domain off (`serverUnreachable`, `notAuthenticated`, `insufficientQuota`), the
    /// domain's `failureCount` grows and `nextRetryAt` is set (see ``BackoffPolicy``). A success
    /// clears both. `sync` itself does not wait for `nextRetryAt`: `serve` does.
    ///
    /// One sync of a domain runs at a time, across processes: a sync first takes the domain's
    /// sync lock (``DomainLock``) and waits while another holds it (``EngineEvent/waitingForSync(process:serving:)``).
    /// - Throws: what the backend throws when the root cannot be listed or an upload fails in a
    ///   way that backs the domain off (for example `serverUnreachable`), `localIOFailure`
    ///   when the database fails, and `cancelled` when the task is cancelled while waiting for
    ///   another sync.
    @discardableResult
    public func sync(events: EventHandler? = nil, upload: Bool = true, settleSeconds: Double = 0) async throws(FileProviderError) -> SyncReport {
        let lock = try await lockForSync(events: events)
        defer { withExtendedLifetime(lock) {} }
        let started = Date()
        var report = SyncReport(domain: domain.name)
        if upload {
            do {
                try await push(report: &report, settleSeconds: settleSeconds)
            } catch {
                recordSyncOutcome(error)
                throw error
            }
        }
        let listingStarted = Date()
        let existing = try store.allItems(domainID: domainID)
        let walk: (entries: [RemoteEntry], failed: [String])
        do {
            walk = try await walkStore(report: &report, events: events)
        } catch {
            recordSyncOutcome(error)
            throw error
        }
        report.listedItems = walk.entries.count
        report.phases.listing = Date().timeIntervalSince(listingStarted)
        var plan = SyncPlan(existing: existing, remote: walk.entries, failedFolders: walk.failed)
        plan.matchMoves()
        try await apply(&plan, report: &report, events: events)

        recordSyncOutcome(nil)
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    /// Lists the whole store, several folders at once.
    private func walkStore(report: inout SyncReport, events: EventHandler?) async throws(FileProviderError)
        -> (entries: [RemoteEntry], failed: [String])
    {
        var entries: [RemoteEntry] = []
        var failed: [String] = []
        var queue: [(ItemIdentifier, String)] = [(.rootContainer, "")]
        var foldersListed = 0
        let backend = self.backend
        let depth = max(4, downloadDepth)
        var rootError: FileProviderError?
        var notices: [String] = []
        await withTaskGroup(of: Listing.self) { group in
            var running = 0
            while true {
                while running < depth, let (folder, path) = queue.popLast() {
                    running += 1
                    group.addTask {
                        do {
                            return Listing(folderPath: path, result: .success(try await backend.enumerateAllItems(in: folder)), folder: folder)
                        } catch {
                            return Listing(folderPath: path, result: .failure(FileProviderError.wrap(error)), folder: folder)
                        }
                    }
                }
                guard let listing = await group.next() else { break }
                running -= 1
                foldersListed += 1
                switch listing.result {
                case .failure(let error):
                    if listing.folderPath.isEmpty { rootError = error }
                    failed.append(listing.folderPath)
                    notices.append("\(display(listing.folderPath)): not listed: \(error.message)")
                case .success(let items):
                    var seen = Set<[UInt8]>()
                    for var item in items {
                        let name = item.filename
                        if let problem = Self.problem(withRemoteName: name, inRoot: listing.folderPath.isEmpty) {
                            notices.append("\(display(listing.folderPath)): skipped an item: \(problem)")
                            continue
                        }
                        if !seen.insert(Array(name.utf8)).inserted {
                            notices.append("\(display(listing.folderPath)): skipped a second item named \(name.debugDescription)")
                            continue
                        }
                        item.parentIdentifier = listing.folder
                        let path = listing.folderPath.isEmpty ? name : listing.folderPath + "/" + name
                        entries.append(RemoteEntry(item: item, path: path))
                        if item.kind == .folder { queue.append((item.identifier, path)) }
                    }
                }
                events?(.listing(folders: foldersListed, items: entries.count))
            }
        }
        if let rootError { throw rootError }
        report.notices.append(contentsOf: notices)
        return (entries, failed)
    }

    /// Why a name from the store cannot be used in the replica, or `nil`.
    static func problem(withRemoteName name: String, inRoot: Bool) -> String? {
        do {
            try Filename.validate(name)
        } catch {
            return error.message
        }
        if name.hasSuffix(Replica.placeholderSuffix) {
            return "\(name.debugDescription) ends in .placeholder, which is reserved for placeholders"
        }
        if name.hasPrefix(".fp-tmp-") || (inRoot && name == ".fileprovider-staging") {
            return "\(name.debugDescription) is reserved for the engine's temporary files"
        }
        return nil
    }
}

/// What sync down will do, computed from the database and a listing of the store.
struct SyncPlan {
    var newItems: [DomainController.RemoteEntry] = []
    /// Stored items whose metadata, version or path changed.
    var changed: [(old: ItemRecord, entry: DomainController.RemoteEntry)] = []
    /// Stored items that are no longer in the store.
    var gone: [ItemRecord] = []
    /// Path-derived moves: a stored item gone and a new one with the same content version.
    var moves: [(old: ItemRecord, entry: DomainController.RemoteEntry)] = []

    init(existing: [ItemRecord], remote: [DomainController.RemoteEntry], failedFolders: [String]) {
        var byID = [ItemIdentifier: ItemRecord](minimumCapacity: existing.count)
        for record in existing where !record.path.isEmpty { byID[record.identifier] = record }
        for entry in remote {
            if let old = byID.removeValue(forKey: entry.item.identifier) {
                if old.kind != entry.item.kind {
                    gone.append(old)
                    newItems.append(entry)
                } else if old.path != entry.path || old.version != entry.item.version || old.filename != entry.item.filename {
                    changed.append((old, entry))
                }
            } else {
                newItems.append(entry)
            }
        }
        let failed = failedFolders.filter { !$0.isEmpty }
        gone += byID.values.filter { record in
            !failed.contains { record.path == $0 || record.path.hasPrefix($0 + "/") }
        }
    }

    /// Pairs gone files with new files of the same content version: those were moved or renamed.
    mutating func matchMoves() {
        var candidates: [Data: [Int]] = [:]
        for (index, record) in gone.enumerated() where record.kind == .file && !record.contentVersion.isEmpty {
            candidates[record.contentVersion, default: []].append(index)
        }
        if candidates.isEmpty { return }
        var matchedGone = Set<Int>()
        var remaining: [DomainController.RemoteEntry] = []
        for entry in newItems {
            if entry.item.kind == .file, var list = candidates[entry.item.version.content], let index = list.popLast() {
                candidates[entry.item.version.content] = list
                matchedGone.insert(index)
                moves.append((gone[index], entry))
            } else {
                remaining.append(entry)
            }
        }
        newItems = remaining
        gone = gone.enumerated().filter { !matchedGone.contains($0.offset) }.map(\.element)
    }
}
