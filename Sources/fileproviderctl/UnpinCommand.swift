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
        let manager = try global.manager()
        var outcomes: [ItemOutcome] = []
        for (domain, paths) in try items.grouped(manager) {
            let controller = try await manager.controller(for: domain)
            outcomes += controller.unpin(paths: paths)
        }
        await manager.close()
        try Output.finish(outcomes, verb: "unpinned", json: output.json)
    }
}
