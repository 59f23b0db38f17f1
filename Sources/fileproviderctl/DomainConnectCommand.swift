import ArgumentParser
import ProviderEngine

struct DomainConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect a disconnected domain again: it syncs as before.",
        discussion: """
            A running serve that has the domain resumes it at once (it is signalled); one \
            started after 'domain disconnect' serves it when it starts again.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    func run() async throws {
        try await Self.set(name, connected: true, global: global, json: output.json)
    }

    /// Connects or disconnects a domain, tells a serve that runs it, and prints the domain.
    static func set(_ name: String, connected: Bool, global: GlobalOptions, json: Bool) async throws {
        let manager = try global.manager()
        let before = try manager.domain(named: name)
        try manager.setConnected(ofDomain: name, connected)
        // A serve running the domain pauses or resumes it now rather than at its next poll.
        let server = before.isConnected == connected ? nil : try manager.signalServe(domain: name)
        let domain = try manager.domain(named: name)
        let shown = try DomainJSON(domain, summary: nil, manager: manager)
        await manager.close()
        if json {
            try Output.json(shown)
            return
        }
        let served = server.map { " (told serve, process \($0))" } ?? ""
        switch (before.isConnected, connected) {
        case (false, false): print("domain '\(name)' is disconnected already")
        case (true, true): print("domain '\(name)' is connected already")
        case (_, false):
            print(
                "disconnected domain '\(name)'\(served): its replica \(domain.replicaPath) and its records are kept; nothing is synced until 'fileproviderctl domain connect \(name)'"
            )
        case (_, true): print("connected domain '\(name)'\(served); the next sync sends what changed meanwhile")
        }
    }
}
