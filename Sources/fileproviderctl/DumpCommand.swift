import ArgumentParser
import ProviderEngine

struct DumpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print every stored item of a domain with all its fields (JSON), for debugging."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The domain's name.")
    var name: String

    func run() async throws {
        let manager = try global.manager()
        let domain = try manager.domain(named: name)
        let records = try manager.store.allItems(domainID: domain.id ?? 0).sorted { $0.path < $1.path }
        Output.write(ItemJSON.encode(records, domain: name, full: true))
    }
}
