import ArgumentParser
import ProviderEngine

struct EvictCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evict",
        abstract: "Drop downloaded contents; items stay as placeholders.",
        discussion:
            "Refuses pinned items (content policy eager, set on the item or a folder above it: the message names where and how to change it) and files with local changes that are not uploaded. A folder stands for the files directly in it, or everything below it with -R. To keep items from being downloaded again, see 'fileproviderctl policy' (online-only)."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var items: ItemArguments

    @Flag(name: [.customShort("R"), .long], help: "Include everything below folders.")
    var recursive = false

    func run() async throws {
        let outcomes = try await items.forEachDomain(try global.manager()) { controller, _, paths in
            await controller.evict(paths: paths, recursive: recursive)
        }
        try Output.finish(outcomes, verb: "evicted", json: output.json)
    }
}
