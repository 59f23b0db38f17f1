import ArgumentParser
import Foundation
import ProviderEngine

struct RulesListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the access rules by program, the shipped defaults marked.",
        discussion: """
            Global rules first, then each domain's. With --json: {"rules": [{"action", "kind", \
            "value", "domain" (null: all domains), "default", "createdAt"}]}.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "Only the rules that apply in this domain (its own and the global ones).", completion: .domainNames)
    var domain: String?

    func run() async throws {
        let manager = try global.manager()
        if let domain { _ = try manager.domain(named: domain) }
        let rules = try manager.accessRules().filter { domain == nil || $0.domain == nil || $0.domain == domain }
        if output.json {
            try Output.json(RulesJSON(rules: rules))
            return
        }
        if rules.isEmpty {
            print("no access rules: every program fetches what it reads")
            return
        }
        let width = rules.map { $0.action.count }.max() ?? 0
        var text = ""
        for rule in rules {
            let scope = rule.domain.map { "domain \(Output.name($0))" } ?? "all domains"
            text +=
                "\(Output.padded(rule.action, to: width))  \(rule.kind) \(Output.name(rule.value))  (\(scope)\(rule.isDefault ? ", default" : ""))\n"
        }
        Output.write(text)
    }
}

struct RulesJSON: Encodable {
    var rules: [NamedAccessRule]
}
