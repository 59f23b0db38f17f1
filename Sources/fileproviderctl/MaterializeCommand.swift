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
        let tally = OutcomeTally(json: output.json)
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

    /// Counting the items below subfolders stops here (a warning need not read a whole tree).
    static let countLimit = 100_000

    /// Without -R, a folder's subfolders are not materialized: the warning that says so for the
    /// folder at `path`, naming how many subfolders and items below them were left, or `nil`
    /// when it has no subfolders (or is not a folder).
    static func subfoldersLeft(in path: String, of domain: String, _ controller: DomainController, _ store: MetadataStore) -> String? {
        guard let children = try? controller.list(at: path, recursive: false) else { return nil }
        let folders = children.filter { $0.kind == .folder && $0.path != path }
        guard !folders.isEmpty else { return nil }
        var items = 0
        for folder in folders where items < countLimit {
            var after: String?
            while items < countLimit,
                let page = try? store.descendants(domainID: controller.domainID, of: folder.path, after: after, limit: 1000),
                let last = page.last
            {
                items += page.count
                after = last.path
            }
        }
        let counted = items >= countLimit ? "more than \(countLimit) items" : "\(items) item\(items == 1 ? "" : "s")"
        let subfolders = "\(folders.count) subfolder\(folders.count == 1 ? "" : "s")"
        return
            "\(domain):/\(path): \(subfolders) with \(counted) below \(folders.count == 1 ? "it" : "them") not materialized; add -R to materialize everything below the folder"
    }
}
