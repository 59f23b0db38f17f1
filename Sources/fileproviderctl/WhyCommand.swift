import ArgumentParser
import Foundation
import ProviderEngine

struct WhyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "why",
        abstract: "Explain why an item is in its state.",
        discussion: """
            Answers from the database and the replica folder, offline: materialized or \
            placeholder, its content policy (lazy, eager, evict-on-remote-update, online-only) \
            and where it is set (on the item, or through a folder above it), outdated, local changes not \
            uploaded yet, pending or failed operations in the journal (attempts, last error), \
            the item's last error, conflicts logged for its path, and whether the domain is \
            backing off (until when).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: ArgumentHelp("The item: DOMAIN:/path or a path inside a replica folder.", valueName: "path"), completion: .itemPaths)
    var path: String

    func run() async throws {
        let manager = try global.manager()
        let explanation = try manager.explain(try manager.resolve(path))
        if output.json {
            try Output.json(explanation)
            return
        }
        var text = Output.name("\(explanation.domain):\(explanation.path)") + "\n"
        for reason in explanation.reasons { text += "  - \(Output.text(reason))\n" }
        Output.write(text)
    }
}
