import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine

struct PendingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pending",
        abstract: "List the local changes the store does not have yet: what the next sync would send.",
        discussion: """
            Scans each replica against the database, offline and without sending or changing \
            anything, as sync's own scan does: new, edited, moved and deleted items, files \
            written at the name of an item that is not downloaded; and the journal's unfinished \
            operations (an upload that failed, was refused or was interrupted), each with its \
            attempts and last error. A file still being written counts (no settle time).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "A domain (default: all).", completion: .domainNames)
    var name: String?

    func run() async throws {
        let manager = try global.manager()
        let domains = try name.map { [try manager.domain(named: $0)] } ?? manager.domains()
        var rows: [PendingJSON] = []
        var failures: [DomainFailureJSON] = []
        for domain in domains {
            do {
                for change in try await manager.unsentChanges(inDomain: domain.name) {
                    rows.append(PendingJSON(domain: domain.name, change: change))
                }
            } catch {
                failures.append(DomainFailureJSON(domain: domain.name, error: error.message))
            }
        }
        await manager.close()
        if output.json {
            try Output.json(PendingListJSON(pending: rows, failures: failures))
        } else {
            if rows.isEmpty && failures.isEmpty { print("nothing pending") }
            let shown = rows.map { Output.name("\($0.domain):\($0.path)") }
            let width = min(40, shown.map(\.count).max() ?? 0)
            var text = ""
            for (row, path) in zip(rows, shown) {
                text +=
                    "\(Output.padded(path, to: width))  \(row.kind): \(Output.text(row.reason))\n"
            }
            Output.write(text)
            for failure in failures { Output.warning("\(failure.domain): \(failure.error)") }
        }
        if !failures.isEmpty { throw CommandFailure() }
    }
}

/// One change the store does not have yet, with its domain.
struct PendingJSON: Encodable {
    var domain: String
    var path: String
    var kind: String
    var from: String?
    var itemKind: String?
    var operation: ItemExplanation.Operation?
    var reason: String

    init(domain: String, change: UnsentChange) {
        self.domain = domain
        path = change.path
        kind = change.kind.rawValue
        from = change.from
        itemKind = change.itemKind
        operation = change.operation
        reason = change.reason
    }
}

struct DomainFailureJSON: Encodable {
    var domain: String
    var error: String
}

struct PendingListJSON: Encodable {
    var pending: [PendingJSON]
    /// Domains whose replica could not be compared (missing, not this domain's).
    var failures: [DomainFailureJSON]
}
