import ArgumentParser
import Logging
import ProviderCore

/// Options every command takes, accepted before the subcommand's name as well as after it, as
/// git and rclone accept them: `fileproviderctl --home DIR status` and `fileproviderctl --json
/// domain list` mean `fileproviderctl status --home DIR` and `fileproviderctl domain list --json`.
///
/// swift-argument-parser reads an option only at the command that declares it, so before
/// parsing, ``reorder(_:root:)`` moves these options (with their values) from between the
/// subcommand words to right after the last one. Anything after the subcommand's name is left
/// as it is.
enum GlobalArguments {
    /// Options followed by a value (`--home DIR` or `--home=DIR`).
    static let valued: Set<String> = ["--home", "--log-level", "--log-file"]
    /// Options without a value. `-v` and `-q` also combine (`-vv`, `-vq`).
    static let flags: Set<String> = ["--json", "--verbose", "--quiet", "-v", "-q"]

    /// The arguments with the options every command takes moved from before the subcommand
    /// path's end to right after it (``valued``, ``flags``), and `-V` before the subcommand
    /// written as `--version`.
    ///
    /// The subcommand path is the leading words that name a subcommand of the command before
    /// them (`domain`, `list`). It ends at the first other word, at `--`, or at the end. Options
    /// already after it keep their places; so do arguments after `--`.
    static func reorder(_ arguments: [String], root: any ParsableCommand.Type) -> [String] {
        var command = root
        var path: [String] = []
        var moved: [String] = []
        var index = 0
        scan: while index < arguments.count {
            let argument = arguments[index]
            switch match(argument) {
            case .flag:
                moved.append(argument)
                index += 1
            case .valued(let inline):
                moved.append(argument)
                index += 1
                if !inline, index < arguments.count {
                    moved.append(arguments[index])
                    index += 1
                }
            case .version where path.isEmpty:
                moved.append("--version")
                index += 1
            case .version, .other:
                guard let next = subcommand(named: argument, of: command) else { break scan }
                path.append(argument)
                command = next
                index += 1
            }
        }
        // Global options and no command, or before `help`: what is asked for is help, which
        // takes none of them (`--version` is itself the request).
        if path.isEmpty && (index == arguments.count || arguments[index] == "help") {
            return moved.contains("--version") ? ["--version"] : Array(arguments[index...])
        }
        return path + moved + arguments[index...]
    }

    private enum Kind {
        case flag
        /// `inline`: the value is part of the argument (`--home=DIR`).
        case valued(inline: Bool)
        case version
        case other
    }

    private static func match(_ argument: String) -> Kind {
        if flags.contains(argument) { return .flag }
        if valued.contains(argument) { return .valued(inline: false) }
        if let equals = argument.firstIndex(of: "="), valued.contains(String(argument[..<equals])) { return .valued(inline: true) }
        if argument == "-V" { return .version }
        // -vv, -vq, -qv…
        if argument.count > 2, argument.hasPrefix("-"), !argument.hasPrefix("--"),
            argument.dropFirst().allSatisfy({ $0 == "v" || $0 == "q" })
        {
            return .flag
        }
        return .other
    }

    /// The subcommand of `command` called `name` (or one of its aliases).
    static func subcommand(named name: String, of command: any ParsableCommand.Type) -> (any ParsableCommand.Type)? {
        command.configuration.subcommands.first { candidate in
            let configuration = candidate.configuration
            return (configuration.commandName ?? candidate._commandName) == name || configuration.aliases.contains(name)
        }
    }
}

/// A command with the options every command takes (``GlobalOptions``). Every command that does
/// work is one: its log level comes from them.
protocol GlobalOptionsCommand {
    var global: GlobalOptions { get }
}

extension BackendListCommand: GlobalOptionsCommand {}
extension BackendTestCommand: GlobalOptionsCommand {}
extension CacheCommand: GlobalOptionsCommand {}
extension ConflictsCommand: GlobalOptionsCommand {}
extension DomainAddCommand: GlobalOptionsCommand {}
extension DomainConnectCommand: GlobalOptionsCommand {}
extension DomainConvertCommand: GlobalOptionsCommand {}
extension DomainDisconnectCommand: GlobalOptionsCommand {}
extension DomainListCommand: GlobalOptionsCommand {}
extension DomainRemoveCommand: GlobalOptionsCommand {}
extension DomainSetCommand: GlobalOptionsCommand {}
extension DomainShowCommand: GlobalOptionsCommand {}
extension DumpCommand: GlobalOptionsCommand {}
extension EvictCommand: GlobalOptionsCommand {}
extension ListCommand: GlobalOptionsCommand {}
extension MaterializeCommand: GlobalOptionsCommand {}
extension PendingCommand: GlobalOptionsCommand {}
extension PinCommand: GlobalOptionsCommand {}
extension PolicyCommand: GlobalOptionsCommand {}
extension PopulateCommand: GlobalOptionsCommand {}
extension ServeCommand: GlobalOptionsCommand {}
extension SignalCommand: GlobalOptionsCommand {}
extension StatusCommand: GlobalOptionsCommand {}
extension SyncCommand: GlobalOptionsCommand {}
extension ThumbnailCommand: GlobalOptionsCommand {}
extension UnpinCommand: GlobalOptionsCommand {}
extension VersionCommand: GlobalOptionsCommand {}
extension WhyCommand: GlobalOptionsCommand {}

extension GlobalOptions {
    /// Sends log messages of commands other than `serve` (which sets up its own) to standard
    /// error (or `--log-file`) as ``LogSetup`` writes them, from ``logLevel(default:)`` up (warning by default):
    /// standard output carries only results.
    /// - Throws: `invalidArgument` when `--log-file` cannot be opened.
    func bootstrapLogging() throws(FileProviderError) {
        try LogSetup.bootstrap(level: logLevel(default: .warning), file: logFile)
    }
}
