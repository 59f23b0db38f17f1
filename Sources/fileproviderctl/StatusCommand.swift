import ArgumentParser
import ProviderEngine

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show every domain's state: items, downloads, pins, last sync, errors."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "Domains to show (default: all).")
    var names: [String] = []

    func run() async throws {
        let manager = try global.manager()
        let domains = names.isEmpty ? try manager.domains() : try names.map { try manager.domain(named: $0) }
        let rows = try domains.map { ($0, try manager.store.summary(domainID: $0.id ?? 0)) }
        if output.json {
            try Output.json(try rows.map { try DomainJSON($0.0, summary: $0.1, manager: manager) })
            return
        }
        if rows.isEmpty {
            print("no domains; add one with: fileproviderctl domain add NAME --backend local --root DIR")
            return
        }
        for (domain, summary) in rows {
            var line =
                "\(domain.name) (\(domain.backendKind), \(domain.replicaMode.rawValue)): \(summary.total) items, \(summary.materialized) materialized (\(Output.bytes(summary.materializedBytes))), \(summary.placeholders) placeholders, \(summary.pinned) pinned, \(summary.datalessFolders) dataless folders; last sync \(Output.date(domain.lastSyncAt))"
            if !domain.isConnected { line += "; disconnected" }
            if let holder = DomainLock.holder(home: manager.home, domain: domain.name) { line += "; served by process \(holder)" }
            print(line)
            if let backing = try manager.backingURL(of: domain) { print("  files kept in \(backing.path)") }
            if let backoff = DomainBackoff(domain) {
                let failures = "\(backoff.failureCount) failure\(backoff.failureCount == 1 ? "" : "s")"
                let due = backoff.isWaiting() ? "" : " (retry due)"
                print(
                    "  backing off until \(Output.clock(backoff.nextRetryAt))\(due) after \(failures): \(backoff.error ?? "unknown error")")
            } else if let error = domain.lastError {
                print("  last error: \(error)")
            }
        }
    }
}
