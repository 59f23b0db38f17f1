import ArgumentParser
import ProviderEngine

struct DomainDisconnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disconnect",
        abstract: "Pause a domain: keep its replica and database, sync nothing until it is connected again.",
        discussion: """
            As Apple's NSFileProviderManager.disconnect: the replica folder, its downloaded \
            files and the database stay as they are, and nothing is synced. 'sync' leaves the \
            domain out ('sync NAME' refuses it), 'serve' does not serve it (a running serve \
            pauses it at once and says so in its log), 'status' and 'domain show' say \
            'disconnected'. Nothing is fetched: materialize and pin refuse to download (the \
            policy pin sets stays). Offline commands (ls, why, evict, pending, policy) keep working. \
            Local changes made meanwhile are sent by the first sync after 'domain connect'.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    func run() async throws {
        try await DomainConnectCommand.set(name, connected: false, global: global, json: output.json)
    }
}
