import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct DomainSetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Change a domain's cache budget or hydration.",
        discussion: """
            --cache-budget SIZE: the most bytes of downloaded contents the domain keeps (its \
            materialized files and the parts present of partly downloaded ones). When it holds \
            more, automatic eviction drops the least recently used files that may go (not \
            pinned, not open, no local changes): 'fileproviderctl serve' within seconds, or \
            'fileproviderctl evict --to-budget' at once. SIZE is a number with K, M, G or T; the \
            units are binary (1K = 1024 bytes, 1G = 1024³ bytes); 'none' removes the budget.

            --hydration full|progressive: how a dataless domain fetches a file a program reads: \
            the whole file on the first access, or only the parts reads need (with read-ahead). \
            Kept but unused in placeholder-files mode.

            A running serve applies the change without a restart.

            Example:
              fileproviderctl domain set photos --cache-budget 20G
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    @Option(help: ArgumentHelp("The most bytes of downloaded contents to keep (20G, 512M; binary units), or none.", valueName: "size"))
    var cacheBudget: String?

    @Option(help: ArgumentHelp("How a dataless domain fetches files on access: full or progressive.", valueName: "hydration"))
    var hydration: Hydration?

    func validate() throws {
        if cacheBudget == nil && hydration == nil {
            throw ValidationError("nothing to change: give --cache-budget SIZE|none or --hydration full|progressive")
        }
    }

    func run() async throws {
        let manager = try global.manager()
        let budget = try cacheBudget.map { text throws(FileProviderError) in try ByteCount.parseOrNone(text) }
        if let budget { try manager.setCacheBudget(ofDomain: name, budget) }
        if let hydration { try manager.setHydration(ofDomain: name, hydration) }
        let domain = try manager.domain(named: name)
        let shown = try DomainJSON(domain, summary: nil, manager: manager)
        await manager.close()
        if output.json {
            try Output.json(shown)
            return
        }
        print(
            "\(domain.name): cache budget \(Output.budget(domain.cacheBudget)), \(Output.bytes(shown.cache.used)) used; hydration \(domain.hydration.rawValue)"
        )
    }
}

extension Hydration: ExpressibleByArgument {}
