import ArgumentParser
import Foundation
import ProviderEngine

struct RulesRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove an access rule: the program fetches again (unless a wider rule names it).",
        discussion: """
            Names the rule as 'rules add' did: --program, --executable or --unit, and --domain \
            for a domain's own rule. Removing a shipped default keeps it removed.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var target: RuleTargetOptions

    func run() async throws {
        let manager = try global.manager()
        let (kind, value) = target.target
        let removed = try manager.removeAccessRule(kind: kind, value: value, domain: target.domain)
        if output.json {
            try Output.json(RuleChangeJSON(rule: nil, replaced: removed))
            return
        }
        let scope = removed.domain.map { "in domain \(Output.name($0))" } ?? "in all domains"
        print("removed \(removed.action) \(removed.kind) \(Output.name(removed.value)) \(scope)\(removed.isDefault ? " (a default)" : "")")
    }
}
