import ArgumentParser
import ProviderEngine

struct DomainRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a domain and its metadata.",
        discussion: "Deletes the replica folder too, unless --keep-replica (then placeholders are removed and downloaded files stay)."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The domain's name.")
    var name: String

    @Flag(help: "Keep the replica folder with the downloaded files.")
    var keepReplica = false

    func run() async throws {
        let manager = try global.manager()
        let domain = try manager.domain(named: name)
        try await manager.removeDomain(named: name, keepReplica: keepReplica)
        await manager.close()
        print("removed domain '\(name)'" + (keepReplica ? "; kept \(domain.replicaPath)" : ""))
    }
}
