import ArgumentParser
import ProviderEngine

struct UnpinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin",
        abstract: "Stop keeping items downloaded and evict them now (policy online-only).",
        discussion: """
            The same as 'fileproviderctl policy PATH... online-only' (the Windows Cloud Files \
            API's unpinned): evicts the downloaded files now, a folder's all below it, and again \
            after each later use. A file that a program has open, or that has local changes not \
            uploaded yet, is refused with a message and stays: it is evicted once it is closed \
            and its changes are uploaded. Unpinning a folder removes the policies set on the \
            items below it. To stop keeping items downloaded without evicting them, use \
            'fileproviderctl policy PATH... lazy'. See 'fileproviderctl policy --help'.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var items: ItemArguments

    func run() async throws {
        var changes: [PolicyChange] = []
        let outcomes = try await items.forEachDomain(try global.manager()) { controller, _, paths in
            let result = await controller.unpin(paths: paths)
            changes += result.changes
            return result.outcomes
        }
        try PolicyCommand.finish(changes, outcomes, json: output.json)
    }
}
