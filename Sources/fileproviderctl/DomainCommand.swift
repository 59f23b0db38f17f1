import ArgumentParser

struct DomainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "domain",
        abstract: "Add, list, show, change, disconnect, connect, convert and remove domains; check their replica mounts.",
        subcommands: [
            DomainAddCommand.self, DomainListCommand.self, DomainShowCommand.self, DomainSetCommand.self, DomainConvertCommand.self,
            DomainRemoveCommand.self, DomainDisconnectCommand.self, DomainConnectCommand.self, DomainCheckMountsCommand.self,
        ]
    )
}
