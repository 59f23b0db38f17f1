import ArgumentParser
import Foundation
import ProviderEngine
import ProviderStore

struct PendingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pending",
        abstract: "List operations on the store that are queued or failed (the journal).",
        discussion: "Each local change is written to the journal before it is sent and marked done after; what stays here is retried by the next sync, after a crash with replay protection."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "A domain (default: all).")
    var name: String?

    func run() async throws {
        let manager = try global.manager()
        let domains = try name.map { [try manager.domain(named: $0)] } ?? manager.domains()
        var rows: [PendingJSON] = []
        for domain in domains {
            for entry in try manager.store.unfinishedOperations(domainID: domain.id ?? -1) {
                rows.append(
                    PendingJSON(
                        domain: domain.name, operation: entry.operation, key: entry.templateIdentifier, state: entry.state.rawValue,
                        attempts: entry.attempts, lastError: entry.lastError, since: entry.createdAt, payload: entry.payload))
            }
        }
        if output.json {
            try Output.json(rows)
            return
        }
        if rows.isEmpty {
            print("nothing pending")
            return
        }
        var text = ""
        for row in rows {
            text += "\(row.domain)  \(row.operation.padding(toLength: 7, withPad: " ", startingAt: 0)) \(row.state.padding(toLength: 8, withPad: " ", startingAt: 0)) attempts \(row.attempts)  \(row.payload)\n"
            if let error = row.lastError { text += "    last error: \(error)\n" }
        }
        Output.write(text)
    }
}

struct PendingJSON: Encodable {
    var domain: String
    var operation: String
    var key: String
    var state: String
    var attempts: Int
    var lastError: String?
    var since: Date
    var payload: String
}
