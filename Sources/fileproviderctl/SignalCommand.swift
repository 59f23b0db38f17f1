import ArgumentParser
import Foundation
import ProviderEngine

struct SignalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signal",
        abstract: "Make a running 'serve' poll a domain's store now.",
        discussion: """
            Rewrites the file <home>/signals/DOMAIN, which 'serve' watches with inotify; the \
            serve process running the domain then syncs it at once, even while it is backing \
            off. Without a running serve nothing else happens (a serve syncs every domain when \
            it starts).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "Domains to poll.", completion: .domainNames)
    var names: [String]

    func run() async throws {
        let manager = try global.manager()
        for name in names { _ = try manager.domain(named: name) }
        var rows: [SignalJSON] = []
        for name in names {
            let holder = try manager.signalServe(domain: name)
            rows.append(SignalJSON(domain: name, servedBy: holder))
        }
        if output.json {
            try Output.json(rows)
            return
        }
        for row in rows {
            if let pid = row.servedBy {
                print("\(row.domain): signalled serve (process \(pid))")
            } else {
                Output.warning("\(row.domain): no serve process runs this domain; the signal waits for the next one")
            }
        }
    }
}

struct SignalJSON: Encodable {
    var domain: String
    /// The process id of the serve running the domain, when one does.
    var servedBy: Int32?
}
