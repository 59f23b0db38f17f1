import ArgumentParser
import Logging
import ProviderCore
import ProviderEngine

struct EvictCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evict",
        abstract: "Drop downloaded contents; items stay as placeholders.",
        discussion: """
            Refuses pinned items (content policy eager, set on the item or a folder above it: \
            the message names where and how to change it) and files with local changes that are \
            not uploaded. A folder stands for the files directly in it, or everything below it \
            with -R. To keep items from being downloaded again, see 'fileproviderctl policy' \
            (online-only).

            --to-budget runs one pass of automatic eviction instead, over the domains named \
            (default: all): online-only files go, then the least recently used files of each \
            domain over its budget ('domain set --cache-budget'), of all domains while they are \
            over their common budget, and of the domains on a file system with less free than \
            the floor ('cache --budget', 'cache --free-space-floor'). It never takes a pinned \
            (eager) file, a file a program has open, or a file with changes not uploaded; it \
            prints what it evicted and why, and what it left. 'serve' runs the same passes by \
            itself.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(
        help: ArgumentHelp(
            "Items: DOMAIN:/path or a path inside a replica folder; with --to-budget, domain names (default: all).", valueName: "path"),
        completion: .itemPaths)
    var paths: [String] = []

    @Flag(name: [.customShort("R"), .long], help: "Include everything below folders.")
    var recursive = false

    @Flag(help: "Run one pass of automatic eviction: bring domains under their budgets and the free-space floor.")
    var toBudget = false

    func validate() throws {
        if toBudget {
            if recursive { throw ValidationError("--to-budget takes domain names; -R is for items") }
        } else if paths.isEmpty {
            throw ValidationError("give the items to evict (DOMAIN:/path), or --to-budget")
        }
    }

    func run() async throws {
        let manager = try global.manager()
        if toBudget {
            // The pass's log lines are this command's output.
            let quiet = Logger(label: "fileprovider.evict") { _ in SwiftLogNoOpLogHandler() }
            let pass: EvictionPass
            do {
                pass = try await Evictor(manager: manager, domains: paths.isEmpty ? nil : paths, logger: quiet).run()
            } catch {
                await manager.close()
                throw error
            }
            await manager.close()
            try Self.show(pass, json: output.json)
            return
        }
        let items = try ItemArguments.parse(["--"] + paths)
        // Counted as they come (a page of a subtree at a time), not held: see OutcomeTally.
        let tally = OutcomeTally(json: output.json, itemVerb: "evicted")
        try await items.forEachDomain(manager, into: tally) { controller, _, paths, outcomes in
            await controller.evict(paths: paths, recursive: recursive, outcomes: outcomes)
        }
        try tally.finish(verb: "evicted")
    }

    static func show(_ pass: EvictionPass, json: Bool) throws {
        if json {
            try Output.json(pass)
            return
        }
        var lines: [String] = []
        for file in pass.evicted {
            lines.append("evicted \(Output.name("\(file.domain):\(file.path)")) (\(Output.bytes(file.bytes))): \(Output.text(file.reason))")
        }
        for file in pass.kept {
            lines.append("kept \(Output.name("\(file.domain):\(file.path)")): \(Output.text(file.reason))")
        }
        for domain in pass.domains where domain.budget != nil || domain.used > 0 {
            lines.append("\(domain.domain): \(Output.bytes(domain.used)) used of \(Output.budget(domain.budget))")
        }
        let count = pass.evicted.count
        lines.append("evicted \(count) file\(count == 1 ? "" : "s") (\(Output.bytes(pass.evictedBytes)))")
        print(lines.joined(separator: "\n"))
        for notice in pass.notices { Output.warning(notice) }
    }
}
