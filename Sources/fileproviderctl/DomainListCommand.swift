import ArgumentParser
import ExternalAdapter
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct DomainListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the domains.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let manager = try global.manager()
        let domains = try manager.domains()
        await AdapterList.describeExternal(of: domains, timeout: ExternalBackends.showingTimeout)
        if output.json {
            try Output.json(
                try domains.map { try DomainJSON($0, summary: try manager.store.summary(domainID: $0.id ?? 0), manager: manager) })
            return
        }
        if domains.isEmpty {
            print("no domains; add one with: fileproviderctl domain add NAME --backend local --root DIR")
            return
        }
        var text = "NAME\tBACKEND\tMODE\tITEMS\tLAST SYNC\tREPLICA\tBACKING\n"
        for domain in domains {
            let summary = try manager.store.summary(domainID: domain.id ?? 0)
            let backing = try manager.backingURL(of: domain)?.path ?? "-"
            var backend = domain.backendKind
            if !manager.isBackendAvailable(for: domain) {
                backend +=
                    " (backend not available" + (AdapterList.unavailableReason(domain.backendKind).map { ": " + Output.text($0) } ?? "")
                    + ")"
            }
            text +=
                "\(domain.name)\t\(backend)\t\(domain.replicaMode.rawValue)\t\(summary.total)\t\(Output.date(domain.lastSyncAt))\t\(domain.replicaPath)\t\(backing)\n"
        }
        Output.write(text)
    }
}

/// A domain as `--json` prints it.
struct DomainJSON: Encodable {
    var name: String
    var backend: String
    /// Whether this program has the backend; a domain without it is not synced here.
    var backendAvailable: Bool
    var options: [String: String]
    var replica: String
    /// `placeholder-files` or `dataless` (see ``ReplicaMode``).
    var mode: String
    /// Why the domain has its mode (the `--mode` asked for, the default, why the default,
    /// dataless, cannot work here, or a `domain convert`); left out for domains added before
    /// it was kept.
    var modeReason: String?
    /// Where a dataless domain's files are (its backing folder); left out in other modes.
    var backing: String?
    /// How programs reach a dataless domain's files: `fanotify` or `fuse`, and why (left out in
    /// other modes).
    var onAccess: String?
    var onAccessReason: String?
    var createdAt: Date
    var lastSyncAt: Date?
    var lastError: String?
    var connected: Bool
    var items: ItemSummary?
    /// Set while the domain backs off after failures.
    var backoff: BackoffJSON?
    /// How a dataless domain fetches files on access: `full` or `progressive`.
    var hydration: String
    /// The domain's own ignore patterns (local names never uploaded).
    var ignore: [String]
    /// The domain's own budget of downloaded contents, bytes; left out when it has none.
    var cacheBudget: Int64?
    /// Bytes of downloaded contents it holds (materialized files and present ranges).
    var cache: CacheUsageJSON
    /// Its last automatic evictions, newest first.
    var evictions: [EvictionJSON]
    /// Local items excluded from sync (the store cannot take them), by path.
    var excluded: [ExcludedJSON]
    /// What the last finished sync left undone, and the local changes the journal holds.
    var problems: SyncProblemsJSON
    /// Accesses of its files that access rules by program refused.
    var accessRefusals: AccessRefusalsJSON
    /// Only from `domain add --adopt-replica`: what it took over.
    var adopted: AdoptionSummary?
    /// Only from `domain add --sync`: what its first sync did (as one of `sync --json`'s
    /// `reports`); left out when that sync failed.
    var sync: SyncReport?

    /// - Throws: `invalidArgument` when a dataless domain's name is not valid (a damaged database).
    init(_ record: DomainRecord, summary: ItemSummary?, manager: ProviderManager) throws(FileProviderError) {
        name = record.name
        backend = record.backendKind
        backendAvailable = manager.isBackendAvailable(for: record)
        options = record.options
        replica = record.replicaPath
        mode = record.replicaMode.rawValue
        modeReason = record.modeReason
        if record.replicaMode == .dataless {
            onAccess = record.onAccess.rawValue
            onAccessReason = record.onAccessReason
        }
        backing = try manager.backingURL(of: record)?.path
        createdAt = record.createdAt
        lastSyncAt = record.lastSyncAt
        lastError = record.lastError
        connected = record.isConnected
        items = summary
        backoff = DomainBackoff(record).map { BackoffJSON(failureCount: $0.failureCount, nextRetryAt: $0.nextRetryAt, error: $0.error) }
        hydration = record.hydration.rawValue
        ignore = record.ignoreList
        cacheBudget = record.cacheBudget
        cache = CacheUsageJSON(try manager.cacheUsage(of: record))
        evictions = try manager.evictions(of: record).map(EvictionJSON.init)
        excluded = try manager.excludedItems(inDomain: record.name).map(ExcludedJSON.init)
        problems = try SyncProblemsJSON(domainID: record.id ?? 0, store: manager.store)
        accessRefusals = AccessRefusalsJSON(try manager.store.accessRefusals(domainID: record.id ?? 0))
    }
}

/// How many accesses access rules by program refused in a domain, and the last refusal.
struct AccessRefusalsJSON: Encodable {
    struct Last: Encodable {
        /// The file's path in the domain, starting with `/`.
        var path: String
        var program: String
        var executable: String?
        var rule: String
        var at: Date
    }

    var count: Int
    var last: Last?

    init(_ refusals: (count: Int, last: AccessRefusalRecord?)) {
        count = refusals.count
        last = refusals.last.map { Last(path: "/" + $0.path, program: $0.program, executable: $0.executable, rule: $0.rule, at: $0.at) }
    }
}

/// A local item excluded from sync as `--json` prints it.
struct ExcludedJSON: Encodable {
    /// Its path in the domain, starting with `/`.
    var path: String
    /// `file`, `folder` or `symlink`.
    var kind: String
    var size: Int64
    var reason: String
    var since: Date

    init(_ record: ExcludedItemRecord) {
        path = "/" + record.path
        kind = record.kind
        size = record.size
        reason = record.reason
        since = record.since
    }
}

/// What a domain holds, as `--json` prints it.
struct CacheUsageJSON: Encodable {
    /// Both below.
    var used: Int64
    /// Bytes of materialized files.
    var materialized: Int64
    /// Bytes present of partly downloaded files.
    var partial: Int64

    init(_ usage: CacheUsage) {
        used = usage.total
        materialized = usage.materialized
        partial = usage.partial
    }
}

/// An automatic eviction as `--json` prints it.
struct EvictionJSON: Encodable {
    /// The file's path in the domain, starting with `/`.
    var path: String
    var size: Int64
    var reason: String
    var at: Date

    init(_ record: EvictionRecord) {
        path = "/" + record.path
        size = record.size
        reason = record.reason
        at = record.at
    }
}

/// A domain's backoff as `--json` prints it.
struct BackoffJSON: Encodable {
    var failureCount: Int
    var nextRetryAt: Date
    var error: String?
}
