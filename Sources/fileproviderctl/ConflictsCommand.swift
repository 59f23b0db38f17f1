import ArgumentParser
import Foundation
import ProviderEngine
import ProviderStore

struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List conflicts the engine resolved by keeping both versions.",
        discussion: """
            bothEdited: edited here and in the store; your version was kept as a conflicted copy.
            editedAndDeleted: edited here, deleted in the store; your version was uploaded again.
            deletedAndEdited: deleted here, edited in the store; the store's version came back.
            nameCollision: a new local item took a name the store already had; it was renamed.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "A domain (default: all).", completion: .domainNames)
    var name: String?

    func run() async throws {
        let manager = try global.manager()
        let domains = try manager.domains()
        let names = Dictionary(uniqueKeysWithValues: domains.compactMap { domain in domain.id.map { ($0, domain.name) } })
        let domainID = try name.map { try manager.domain(named: $0).id ?? -1 }
        let conflicts = try manager.store.conflicts(domainID: domainID)
        if output.json {
            try Output.json(
                conflicts.map {
                    ConflictJSON(
                        domain: names[$0.domainID] ?? "?", path: "/" + $0.path, keptPath: $0.keptPath.map { "/" + $0 }, kind: $0.kind,
                        details: $0.details, date: $0.createdAt)
                })
            return
        }
        if conflicts.isEmpty {
            print("no conflicts")
            return
        }
        var text = ""
        for conflict in conflicts {
            let domain = names[conflict.domainID] ?? "?"
            text +=
                "\(Output.date(conflict.createdAt))  \(Output.padded(conflict.kind, to: max(21, conflict.kind.count + 1)))\(Output.name("\(domain):/\(conflict.path)"))"
            if let kept = conflict.keptPath { text += " -> \(Output.name("\(domain):/\(kept)"))" }
            text += "\n    \(Output.text(conflict.details))\n"
        }
        Output.write(text)
    }
}

struct ConflictJSON: Encodable {
    var domain: String
    var path: String
    var keptPath: String?
    var kind: String
    var details: String
    var date: Date
}
