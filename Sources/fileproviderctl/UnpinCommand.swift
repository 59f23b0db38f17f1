import ArgumentParser
import ProviderEngine

struct UnpinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin",
        abstract: "Stop keeping items downloaded; their contents stay until evicted."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var items: ItemArguments

    func run() async throws {
        let outcomes = try await items.forEachDomain(try global.manager()) { controller, _, paths in
            controller.unpin(paths: paths)
        }
        try Output.finish(outcomes, verb: "unpinned", json: output.json)
    }
}
