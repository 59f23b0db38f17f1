import ArgumentParser
import Foundation
import ProviderEngine
import ProviderStore

struct RulesAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add an access rule: what a program's reads of files not downloaded do.",
        discussion: """
            Replaces the rule of the same program in the same scope (a shipped default too).
            Examples:
              fileproviderctl rules add deny --program rg
              fileproviderctl rules add present-only --unit app-org.gnome.Nautilus.scope --domain photos
              fileproviderctl rules add fetch --program baloo_file --domain notes
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var target: RuleTargetOptions

    @Argument(help: ArgumentHelp("fetch, deny or present-only.", valueName: "action"))
    var action: String

    func validate() throws {
        if AccessRuleRecord.Action(rawValue: action) == nil {
            throw ValidationError("unknown action '\(action)': use fetch, deny or present-only")
        }
    }

    func run() async throws {
        let manager = try global.manager()
        let (kind, value) = target.target
        let action = AccessRuleRecord.Action(rawValue: action) ?? .fetch
        let old = try manager.addAccessRule(action, kind: kind, value: value, domain: target.domain)
        let added = try manager.accessRules().first { $0.kind == kind.rawValue && $0.value == value && $0.domain == target.domain }
        if output.json {
            try Output.json(RuleChangeJSON(rule: added, replaced: old))
            return
        }
        let scope = target.domain.map { "in domain \(Output.name($0))" } ?? "in all domains"
        var line = "\(action.rawValue) \(kind.rawValue) \(Output.name(value)) \(scope)"
        if let old { line += " (replaces \(old.action)\(old.isDefault ? ", a default" : ""))" }
        print(line)
    }
}

struct RuleChangeJSON: Encodable {
    var rule: NamedAccessRule?
    var replaced: NamedAccessRule?
}
