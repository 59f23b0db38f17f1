import ArgumentParser
import ProviderEngine
import ProviderStore

struct DumpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print every stored item of a domain with all its fields (JSON), for debugging."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    func run() async throws {
        let manager = try global.manager()
        let domain = try manager.domain(named: name)
        let records = try manager.store.allItems(domainID: domain.id ?? 0).sorted { $0.path < $1.path }
        let policies = PolicyResolver(explicit: try manager.store.explicitPolicies(domainID: domain.id ?? 0))
        Output.write(ItemJSON.encode(records, domain: name, policies: policies, full: true))
    }
}
