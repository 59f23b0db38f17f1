import ArgumentParser
import CSystemShims
import Foundation
import ProviderCore

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
            Exit codes: 0 success, 1 failure, 2 usage error.
            """,
        subcommands: [
            DomainCommand.self, SyncCommand.self, ListCommand.self, PopulateCommand.self, MaterializeCommand.self,
            EvictCommand.self, PinCommand.self, UnpinCommand.self, StatusCommand.self, ConflictsCommand.self,
            PendingCommand.self, WhyCommand.self, ServeCommand.self, SignalCommand.self, ThumbnailCommand.self,
            DumpCommand.self,
        ]
    )

    /// Runs the command, with exit codes 0 (success), 1 (failure) and 2 (usage).
    static func main() async {
        retainFreedMemory()
        do {
            var command = try parseAsRoot()
            if var async = command as? any AsyncParsableCommand {
                try await async.run()
            } else {
                try command.run()
            }
        } catch let error as FileProviderError {
            Output.error(error.message)
            Glibc.exit(usageCodes.contains(error.code) ? 2 : 1)
        } catch let error as CommandFailure {
            if !error.message.isEmpty { Output.error(error.message) }
            Glibc.exit(1)
        } catch {
            let code = exitCode(for: error)
            if code == ExitCode.success || code == ExitCode(64) || code == ExitCode.validationFailure {
                let message = fullMessage(for: error)
                if code == .success {
                    print(message)
                    Glibc.exit(0)
                }
                FileHandle.standardError.write(Data((message + "\n").utf8))
                Glibc.exit(2)
            }
            exit(withError: error)
        }
    }

    /// Lets glibc keep up to 8 MiB of freed memory per arena instead of 128 KiB.
    ///
    /// libssh2 allocates every packet it receives and frees it once read; with glibc's default
    /// the threads' arenas shrank and grew again constantly, and each page given back was
    /// faulted in and zeroed anew (120,000 page faults per GiB downloaded over SFTP, about 4% of
    /// the transfer's CPU). Memory actually in use is unaffected.
    static func retainFreedMemory() {
        _ = fp_set_trim_threshold(8 << 20)
    }

    static let usageCodes: Set<FileProviderError.Code> = [.invalidArgument, .providerDomainNotFound]
}

/// A command failed after printing what went wrong; exit 1.
struct CommandFailure: Error {
    var message: String = ""
}
