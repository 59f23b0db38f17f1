import ArgumentParser
import ProviderEngine

struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Keep items downloaded, now and after every sync.",
        discussion: "Pinning a folder keeps everything below it downloaded, including items added later. Pinned items cannot be evicted."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var items: ItemArguments

    func run() async throws {
        let manager = try global.manager()
        var outcomes: [ItemOutcome] = []
        for (domain, paths) in try items.grouped(manager) {
            let controller = try await manager.controller(for: domain)
            let bar = ProgressBar(label: "pin \(domain)")
            outcomes += await controller.pin(paths: paths, events: bar.handler)
            bar.finish()
        }
        await manager.close()
        try Output.finish(outcomes, verb: "pinned and materialized", json: output.json)
    }
}
