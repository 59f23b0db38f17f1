import ArgumentParser
import ExternalAdapter
import ProviderEngine
import ProviderSystem

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show every domain's state: items, downloads, pins, cache use and budget, last evictions, last sync, errors."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "Domains to show (default: all).", completion: .domainNames)
    var names: [String] = []

    func run() async throws {
        let manager = try global.manager()
        let domains = names.isEmpty ? try manager.domains() : try names.map { try manager.domain(named: $0) }
        await AdapterList.describeExternal(of: domains, timeout: ExternalBackends.showingTimeout)
        let rows = try domains.map { ($0, try manager.store.summary(domainID: $0.id ?? 0)) }
        if output.json {
            try Output.json(try rows.map { try DomainJSON($0.0, summary: $0.1, manager: manager) })
            return
        }
        if rows.isEmpty {
            print("no domains; add one with: fileproviderctl domain add NAME --backend local --root DIR")
            return
        }
        let settings = try manager.cacheSettings()
        if settings.cacheBudget != nil || settings.freeSpaceFloor != nil {
            let used = try manager.domains().reduce(Int64(0)) {
                $0.addingReportingOverflow(try manager.cacheUsage(of: $1).total).partialValue
            }
            var line = "all domains: \(Output.bytes(used)) downloaded"
            if let budget = settings.cacheBudget { line += " of a \(Output.bytes(budget)) budget" }
            if let floor = settings.freeSpaceFloor { line += "; keeping \(Output.bytes(floor)) free" }
            print(line)
        }
        for (domain, summary) in rows {
            var line =
                "\(domain.name) (\(domain.backendKind), \(domain.replicaMode.rawValue)): \(summary.total) items, \(summary.materialized) materialized (\(Output.bytes(summary.materializedBytes))), \(summary.placeholders) placeholders, \(summary.pinned) pinned, \(summary.datalessFolders) dataless folders; last sync \(Output.date(domain.lastSyncAt))"
            if !domain.isConnected { line += "; disconnected: nothing is synced ('fileproviderctl domain connect \(domain.name)')" }
            if !manager.isBackendAvailable(for: domain) {
                line += "; backend not available: not synced here"
                if let reason = AdapterList.unavailableReason(domain.backendKind) { line += " (\(Output.text(reason)))" }
            }
            if let holder = DomainLock.holder(home: manager.home, domain: domain.name) { line += "; served by process \(holder)" }
            print(line)
            if let backing = try manager.backingURL(of: domain) { print("  files kept in \(backing.path)") }
            if summary.datalessFolders > 0 {
                print(
                    "  dataless folders: \(summary.datalessFolders) left to write (serve writes them in the background; 'fileproviderctl populate -R \(domain.name):/' writes them now)"
                )
            }
            let usage = try manager.cacheUsage(of: domain)
            if domain.cacheBudget != nil || usage.partial > 0 {
                var cache = "  cache: \(Output.bytes(usage.total)) used of \(Output.budget(domain.cacheBudget))"
                if usage.partial > 0 { cache += " (\(Output.bytes(usage.partial)) in partly downloaded files)" }
                print(cache)
            }
            for eviction in try manager.evictions(of: domain, limit: 3) {
                print(
                    "  evicted \(Output.date(eviction.at)) \(Output.name("/" + eviction.path)) (\(Output.bytes(eviction.size))): \(Output.text(eviction.reason))"
                )
            }
            // Counted by SQL, with a few examples: never the whole list of a large domain.
            let excluded = try manager.store.excludedItems(domainID: domain.id ?? 0, limit: 3)
            if excluded.count > 0 {
                print(
                    "  \(excluded.count) item\(excluded.count == 1 ? "" : "s") excluded from sync (kept in the replica, not sent: the store cannot take \(excluded.count == 1 ? "it" : "them"))"
                )
                for item in excluded.first { print("    \(Output.name("/" + item.path)): \(Output.text(item.reason))") }
                if excluded.count > 3 { print("    … 'fileproviderctl pending \(domain.name)' lists them all") }
            }
            Self.printProblems(
                try SyncProblemsJSON(domainID: domain.id ?? 0, store: manager.store, limit: Self.shownProblems), of: domain.name)
            let refusals = try manager.store.accessRefusals(domainID: domain.id ?? 0)
            if let last = refusals.last, refusals.count > 0 {
                print(
                    "  \(refusals.count) access\(refusals.count == 1 ? "" : "es") refused by access rules (last \(Output.date(last.at)): \(Output.text(last.program)) on \(Output.name("/" + last.path)), rule \(Output.text(last.rule))); nothing fetched for them"
                )
            }
            if let backoff = DomainBackoff(domain) {
                let failures = "\(backoff.failureCount) failure\(backoff.failureCount == 1 ? "" : "s")"
                let due = backoff.isWaiting() ? "" : " (retry due)"
                print(
                    "  backing off until \(Output.clock(backoff.nextRetryAt))\(due) after \(failures): \(Output.text(backoff.error ?? "unknown error"))"
                )
            } else if let error = domain.lastError {
                print("  last error: \(Output.text(error))")
            }
        }
    }
}

extension StatusCommand {
    /// The most problems of a domain's last sync the text output shows.
    static let shownProblems = 5

    /// Prints what the last finished sync of `domain` left undone and the changes the store
    /// refused, with a few examples and where to look further.
    static func printProblems(_ problems: SyncProblemsJSON, of domain: String) {
        if let summary = problems.summary {
            print("  last sync: \(summary)")
            for problem in problems.latest.prefix(shownProblems) {
                let what = problem.kind == .skipped ? "skipped" : "not sent"
                print("    \(what) \(Output.name(problem.path)): \(Output.text(problem.reason))")
            }
            let total = problems.skipped + problems.notSent
            if total > shownProblems {
                print(
                    "    … \(total - min(total, shownProblems)) more: 'fileproviderctl status --json \(domain)' lists the first \(SyncProblemsJSON.exampleLimit)"
                )
            }
        }
        if problems.refusedChanges > 0 {
            let count = problems.refusedChanges
            print(
                "  \(count) local change\(count == 1 ? "" : "s") refused by the store at the last attempt (sent again by the next sync): 'fileproviderctl pending \(domain)' says why"
            )
        }
    }
}
