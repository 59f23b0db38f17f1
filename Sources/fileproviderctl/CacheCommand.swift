import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Show or set the budget of all domains together and the free space to keep.",
        discussion: """
            Without options, shows the settings and what each domain holds. Settings apply to \
            every domain of the state folder; a domain's own budget is set with 'fileproviderctl \
            domain set NAME --cache-budget SIZE'.

            --budget SIZE: the most bytes of downloaded contents all domains together keep; \
            beyond it, automatic eviction drops the least recently used files of any domain.
            --free-space-floor SIZE: when the file system holding a replica has less free than \
            this, files of the domains there are evicted until it has it again.

            SIZE is a number with K, M, G or T; the units are binary (1K = 1024 bytes, 1G = \
            1024^3 bytes); 'none' removes the setting. Automatic eviction never takes a pinned \
            (eager) file, a file a program has open, or a file with changes not uploaded. It runs \
            in 'fileproviderctl serve' (within seconds of a change here) and once with \
            'fileproviderctl evict --to-budget'.

            Example:
              fileproviderctl cache --budget 50G --free-space-floor 5G
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Option(help: ArgumentHelp("The budget of all domains together (50G; binary units), or none.", valueName: "size"))
    var budget: String?

    @Option(help: ArgumentHelp("The free space to keep on the replicas' file systems (5G; binary units), or none.", valueName: "size"))
    var freeSpaceFloor: String?

    func run() async throws {
        let manager = try global.manager()
        if let budget { try manager.setGlobalCacheBudget(try ByteCount.parseOrNone(budget)) }
        if let freeSpaceFloor { try manager.setFreeSpaceFloor(try ByteCount.parseOrNone(freeSpaceFloor)) }
        let settings = try manager.cacheSettings()
        var domains: [CacheDomainJSON] = []
        for domain in try manager.domains() {
            let usage = try manager.cacheUsage(of: domain)
            domains.append(
                CacheDomainJSON(
                    name: domain.name, used: usage.total, materialized: usage.materialized, partial: usage.partial,
                    budget: domain.cacheBudget))
        }
        await manager.close()
        let used = domains.reduce(Int64(0)) { $0.addingReportingOverflow($1.used).partialValue }
        if output.json {
            try Output.json(CacheJSON(budget: settings.cacheBudget, freeSpaceFloor: settings.freeSpaceFloor, used: used, domains: domains))
            return
        }
        var lines = [
            "budget of all domains: \(Output.budget(settings.cacheBudget)) (\(Output.bytes(used)) used)",
            "free-space floor:      \(Output.budget(settings.freeSpaceFloor))",
        ]
        for domain in domains {
            lines.append("  \(domain.name): \(Output.bytes(domain.used)) used of \(Output.budget(domain.budget))")
        }
        print(lines.joined(separator: "\n"))
    }
}

/// `cache --json`.
struct CacheJSON: Encodable {
    /// Bytes; left out when not set.
    var budget: Int64?
    var freeSpaceFloor: Int64?
    /// Bytes all domains hold.
    var used: Int64
    var domains: [CacheDomainJSON]
}

struct CacheDomainJSON: Encodable {
    var name: String
    var used: Int64
    var materialized: Int64
    var partial: Int64
    /// The domain's own budget; left out when it has none.
    var budget: Int64?
}
