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
        let outcomes = try await items.forEachDomain(try global.manager()) { controller, domain, paths in
            let bar = ProgressBar(label: "pin \(domain)")
            defer { bar.finish() }
            return await controller.pin(paths: paths, events: bar.handler)
        }
        try Output.finish(outcomes, verb: "pinned and materialized", json: output.json)
    }
}
