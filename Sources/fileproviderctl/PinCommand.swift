import ArgumentParser
import ProviderEngine

struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Keep items downloaded, now and after every sync (policy eager).",
        discussion: """
            The same as 'fileproviderctl policy PATH... eager' (Apple's \
            downloadEagerlyAndKeepDownloaded, cfapi's pinned): downloads the files now, and a \
            folder's files below it, items added later too, with every sync. Pinned items cannot \
            be evicted. Pinning a folder removes the policies set on the items below it. See \
            'fileproviderctl policy --help'.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions
    @OptionGroup var items: ItemArguments

    func run() async throws {
        let outcomes = try await items.forEachDomain(try global.manager()) { controller, domain, paths in
            let bar = ProgressBar(label: "pin \(domain)", options: progress)
            defer { bar.finish() }
            return await controller.pin(paths: paths, events: bar.handler)
        }
        try Output.finish(outcomes, verb: "pinned and materialized", json: output.json)
    }
}
