import ArgumentParser
import ProviderEngine

struct PopulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "populate",
        abstract: "Show the items of dataless folders in the replica, without downloading contents.",
        discussion: """
            A sync writes the items of the folders the replica already shows, and of new folders \
            up to its --populate-limit; other folders stay dataless: real, empty folders whose \
            items only the database knows ('fileproviderctl ls' lists them). Populating a folder \
            writes its files as placeholders and its subfolders as dataless folders, from the \
            database, offline, as Apple's system does when a dataless folder is opened. A path \
            inside a dataless folder populates the folders above it; -R populates everything \
            below. 'serve' populates a folder by itself when a program opens it.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var items: ItemArguments

    @Flag(name: [.customShort("R"), .long], help: "Populate every folder below too.")
    var recursive = false

    func run() async throws {
        let outcomes = try await items.forEachDomain(try global.manager()) { controller, _, paths in
            await controller.populate(paths: paths, recursive: recursive)
        }
        try Output.finish(outcomes, verb: "populated", json: output.json)
    }
}
