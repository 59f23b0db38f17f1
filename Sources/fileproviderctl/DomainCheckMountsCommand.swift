import ArgumentParser
import ProviderEngine

struct DomainCheckMountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-mounts",
        abstract: "Detach the replica mounts of dataless domains that no live serve guards any more.",
        discussion: """
            When serve and its guardian (fileprovider-guard) are killed together, the replica \
            mount stays without a listener, and programs reading a file never downloaded \
            through it would read zeros. This command detaches every such mount (and prints \
            the domain's name), and leaves mounts a live serve or guardian guards. Every other \
            command does the same when it starts, and so does serve; the system unit runs this \
            one before serve starts and after it stops, however it stopped. Needs root.
            """
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let manager = try global.manager(checkingMounts: false)
        for name in manager.detachUnguardedReplicaMounts() {
            print("\(name): detached its unguarded replica mount")
        }
    }
}
