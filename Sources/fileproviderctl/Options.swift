import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The state folder (database, default replicas).", valueName: "dir"), completion: .directory)
    var home: String?

    /// Opens the state folder.
    func manager() throws -> ProviderManager {
        let url = home.map { URL(fileURLWithPath: $0) } ?? ProviderManager.defaultHome()
        return try ProviderManager(home: url, registry: AdapterList.registry)
    }
}

/// `--json` for commands that print data.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON for scripts instead of text.")
    var json = false
}
