import ArgumentParser
import ProviderCore
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
        let id = domain.id ?? 0
        let policies = try PolicyResolver.read(from: manager.store, domainID: id)
        // Printed as read, in path order: the root, then the rest a page at a time (a domain of
        // any size in bounded memory).
        var json = ItemJSON.Stream(domain: name, policies: policies, full: true)
        if let root = try manager.store.item(domainID: id, path: "") { json.write([root]) }
        try ItemPages.forEachPage(manager.store, domainID: id, below: "") { json.write($0) }
        json.finish()
    }
}
