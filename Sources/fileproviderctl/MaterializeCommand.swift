import ArgumentParser
import ProviderEngine

struct MaterializeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "materialize",
        abstract: "Download items so their contents are in the replica.",
        discussion:
            "A folder stands for the files directly in it, or everything below it with -R. Each file is downloaded to a staging file, checked, and renamed into place; its placeholder is removed."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions
    @OptionGroup var items: ItemArguments

    @Flag(name: [.customShort("R"), .long], help: "Include everything below folders.")
    var recursive = false

    func run() async throws {
        // Counted as they come (a page of a subtree at a time), not held: see OutcomeTally.
        let tally = OutcomeTally(json: output.json)
        try await items.forEachDomain(try global.manager(), into: tally) { controller, domain, paths, outcomes in
            let bar = ProgressBar(label: "materialize \(domain)", options: progress)
            defer { bar.finish() }
            await controller.materialize(paths: paths, recursive: recursive, events: bar.handler, outcomes: outcomes)
        }
        try tally.finish(verb: "materialized")
    }
}
