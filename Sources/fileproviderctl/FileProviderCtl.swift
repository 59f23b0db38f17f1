import ArgumentParser
import ExternalAdapter
import Foundation
import ProviderCore
import ProviderEngine
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

@main
struct FileProviderCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fileproviderctl",
        abstract: "Manage File Provider domains: remote stores replicated into local folders.",
        discussion: """
            A domain is one configured store (a local folder, an SFTP account, an HTTP media \
            service). Its items appear in a replica folder as placeholders (<name>.placeholder) \
            until you materialize them; evict drops the contents again. All domains share one \
            metadata database in the state folder (--home, $FILEPROVIDER_HOME, default \
            $XDG_DATA_HOME/fileprovider).

            Paths are DOMAIN:/path, or a path inside a replica folder.
            Exit codes: 0 success, 1 failure, 2 usage error, 3 partial success (a sync that \
            skipped items of the store or did not send local changes: see 'fileproviderctl \
            status'), 130 interrupted by Ctrl-C (SIGINT), 143 stopped by SIGTERM. The first Ctrl-C stops a command cleanly: what was done is \
            recorded and listed, running the same command again finishes the work; a second one \
            stops it at once.

            --home, --json, -v/--verbose, -q/--quiet and --log-level may come before the \
            command's name too: fileproviderctl --home DIR status.
            """,
        version: VersionCommand.versionLine,
        subcommands: [
            DomainCommand.self, SyncCommand.self, ListCommand.self, PopulateCommand.self, MaterializeCommand.self,
            EvictCommand.self, PolicyCommand.self, PinCommand.self, UnpinCommand.self, StatusCommand.self, CacheCommand.self,
            ConflictsCommand.self, FindCommand.self, WhereisCommand.self, DupesCommand.self, VerifyCommand.self,
            PendingCommand.self, WhyCommand.self, RulesCommand.self, ServeCommand.self, SignalCommand.self, ThumbnailCommand.self,
            DumpCommand.self, BackendCommand.self, VersionCommand.self,
        ]
    )

    /// Runs the command, with exit codes 0 (success), 1 (failure), 2 (usage), 3 (partial
    /// success, ``CommandPartial``), and 130 or 143
    /// after SIGINT or SIGTERM (see ``Interruption``).
    static func main() async {
        CryptoLibrary.keepUntilExit()
        retainFreedMemory()
        Interruption.shared.install()
        Terminal.shared.install()
        let status = await runCommand()
        // Programs started to describe themselves and not used are not left running.
        await ExternalBackends.stopParkedPrograms()
        Glibc.exit(Interruption.shared.exitStatus ?? status)
    }

    /// Runs the command in a task a signal cancels; prints its error, if any, and returns its
    /// exit status.
    static func runCommand() async -> Int32 {
        do {
            if let shell = Completions.scriptRequest(Array(CommandLine.arguments.dropFirst())) {
                print(Completions.script(for: shell))
                return 0
            }
            let reordered = GlobalArguments.reorder(Array(CommandLine.arguments.dropFirst()), root: Self.self)
            if let message = CommandSuggestion.unknownCommand(in: reordered, root: Self.self) {
                Output.error(message)
                return 2
            }
            let arguments = try DomainAddCommand.placingBackendOptions(reordered)
            let command = ParsedCommand(try parseAsRoot(arguments))
            if let global = (command.value as? any GlobalOptionsCommand)?.global, !(command.value is ServeCommand) {
                try global.bootstrapLogging()
            }
            try await Interruption.shared.run {
                if var async = command.value as? any AsyncParsableCommand {
                    try await async.run()
                } else {
                    var sync = command.value
                    try sync.run()
                }
            }
            return 0
        } catch is CommandInterrupted {
            return 1
        } catch is CommandPartial {
            return CommandPartial.exitStatus
        } catch let error as FileProviderError {
            if error.code == .cancelled, Interruption.shared.signal != nil {
                let detail = error.message == "cancelled" ? "stopped before it finished" : error.message
                FileHandle.standardError.write(
                    Data("interrupted: \(TerminalText.escaped(detail)); run the same command again to finish\n".utf8))
                return 1
            }
            Output.error(error.message)
            return usageCodes.contains(error.code) ? 2 : 1
        } catch let error as CommandFailure {
            if !error.message.isEmpty { Output.error(error.message) }
            return 1
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if code == .success {
                print(message)
                return 0
            }
            if !message.isEmpty { FileHandle.standardError.write(Data((TerminalText.escaped(message) + "\n").utf8)) }
            if code == ExitCode(64) || code == ExitCode.validationFailure { return 2 }
            return code.rawValue
        }
    }

    /// Lets glibc keep up to 8 MiB of freed memory per arena instead of 128 KiB.
    ///
    /// libssh2 allocates every packet it receives and frees it once read; with glibc's default
    /// the threads' arenas shrank and grew again constantly, and each page given back was
    /// faulted in and zeroed anew (120,000 page faults per GiB downloaded over SFTP, about 4% of
    /// the transfer's CPU). Memory actually in use is unaffected.
    static func retainFreedMemory() {
        SystemCalls.setTrimThreshold(8 << 20)
    }

    static let usageCodes: Set<FileProviderError.Code> = [.invalidArgument, .providerDomainNotFound]
}

/// A command failed after printing what went wrong; exit 1.
struct CommandFailure: Error {
    var message: String = ""
}

/// A command did what it could but not everything (a sync that skipped items or did not send
/// changes), after printing what was left; exit 3, as rsync's 23 and 24 tell a partial transfer.
struct CommandPartial: Error {
    static let exitStatus: Int32 = 3
}

/// The parsed command, handed to the task that runs it.
struct ParsedCommand: @unchecked Sendable {
    let value: any ParsableCommand
    init(_ value: any ParsableCommand) { self.value = value }
}
