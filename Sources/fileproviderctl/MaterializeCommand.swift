import ArgumentParser
import ProviderEngine
import ProviderStore

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
        let tally = OutcomeTally(json: output.json, itemVerb: "materialized")
        var skipped: [String] = []
        let manager = try global.manager()
        try await items.forEachDomain(manager, into: tally) { controller, domain, paths, outcomes in
            let bar = ProgressBar(label: "materialize \(domain)", options: progress)
            defer { bar.finish() }
            await controller.materialize(paths: paths, recursive: recursive, events: bar.handler, outcomes: outcomes)
            if !recursive { skipped += paths.compactMap { Self.subfoldersLeft(in: $0, of: domain, controller, manager.store) } }
        }
        for line in skipped { Output.warning(line) }
        try tally.finish(verb: "materialized")
    }

    /// The warning reads at most this many items below a folder, a page at a time (a folder of
    /// a million files is not read whole to find its subfolders).
    static let scanLimit = 100_000

    /// Without -R, a folder's subfolders are not materialized: the warning that says so for the
    /// folder at `path`, naming how many subfolders and items below them were left, or `nil`
    /// when it has no subfolders (or is not a folder). Past ``scanLimit`` items the counts are
    /// lower bounds (`at least`).
    static func subfoldersLeft(in path: String, of domain: String, _ controller: DomainController, _ store: MetadataStore) -> String? {
        let target = try? store.item(domainID: controller.domainID, path: path)
        guard path.isEmpty || target?.kind == .folder else { return nil }
        let prefix = path.isEmpty ? "" : path + "/"
        var folders = 0
        var items = 0
        var scanned = 0
        var after: String?
        while scanned < scanLimit,
            let page = try? store.descendants(domainID: controller.domainID, of: path, after: after, limit: 1000),
            let last = page.last
        {
            for item in page {
                let relative = item.path.dropFirst(prefix.count)
                if relative.contains("/") {
                    items += 1
                } else if item.kind == .folder {
                    folders += 1
                }
            }
            scanned += page.count
            after = last.path
        }
        guard folders > 0 else { return nil }
        let more = scanned >= scanLimit ? "at least " : ""
        let subfolders = "\(more)\(folders) subfolder\(folders == 1 ? "" : "s")"
        let below = "\(more)\(items) item\(items == 1 ? "" : "s")"
        return
            "\(domain):/\(path): \(subfolders) with \(below) below \(folders == 1 ? "it" : "them") not materialized; add -R to materialize everything below the folder"
    }
}
