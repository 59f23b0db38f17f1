import ArgumentParser
import ProviderEngine
import ProviderStore

struct DomainShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one domain's settings and state.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    func run() async throws {
        let manager = try global.manager()
        let domain = try manager.domain(named: name)
        let summary = try manager.store.summary(domainID: domain.id ?? 0)
        let shown = try DomainJSON(domain, summary: summary, manager: manager)
        if output.json {
            try Output.json(shown)
            return
        }
        var lines = [
            "name:         \(domain.name)",
            "backend:      \(domain.backendKind)" + (shown.backendAvailable ? "" : " (backend not available: not synced here)"),
        ]
        for (key, value) in domain.options.sorted(by: { $0.key < $1.key }) {
            lines.append("  --\(key) \(value)")
        }
        lines += [
            "replica:      \(domain.replicaPath)",
            "mode:         \(shown.mode)" + (shown.modeReason.map { " (\($0))" } ?? ""),
        ]
        if let backing = shown.backing { lines.append("backing:      \(backing)") }
        if let onAccess = shown.onAccess {
            lines.append("on access:    \(onAccess)" + (shown.onAccessReason.map { " (\($0))" } ?? ""))
        }
        lines += [
            "created:      \(Output.date(domain.createdAt))",
            "last sync:    \(Output.date(domain.lastSyncAt))",
            "connected:    \(domain.isConnected ? "yes" : "no: nothing is synced ('fileproviderctl domain connect \(domain.name)')")",
            "items:        \(summary.total) (\(summary.folders) folders (\(summary.datalessFolders) dataless), \(summary.placeholders) placeholders, \(summary.materialized) materialized, \(summary.pinned) pinned)",
            "downloaded:   \(Output.bytes(summary.materializedBytes))",
            "cache:        \(Output.bytes(shown.cache.used)) used of \(Output.budget(domain.cacheBudget))\(shown.cache.partial > 0 ? " (\(Output.bytes(shown.cache.partial)) in partly downloaded files)" : "")",
            "hydration:    \(domain.hydration.rawValue)\(ReplicaLayouts.layout(of: domain).keepsPartialContents ? "" : " (used in dataless mode)")",
        ]
        for eviction in shown.evictions {
            lines.append(
                "  evicted \(Output.date(eviction.at)) \(Output.name(eviction.path)) (\(Output.bytes(eviction.size))): \(Output.text(eviction.reason))"
            )
        }
        if let error = domain.lastError { lines.append("last error:   \(Output.text(error))") }
        print(lines.joined(separator: "\n"))
    }
}
