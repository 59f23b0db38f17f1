import ArgumentParser
import Foundation
import Logging
import ProviderCore
import ProviderEngine

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The state folder (database, default replicas).", valueName: "dir"), completion: .directory)
    var home: String?

    /// Opens the state folder, and first detaches the replica mount of any dataless domain
    /// that no live `serve` or guardian guards any more
    /// (``ProviderManager/detachUnguardedReplicaMounts()``), so no command leaves a mount
    /// through which programs read zeros (unless `checkingMounts` is false).
    func manager(checkingMounts: Bool = true) throws -> ProviderManager {
        let url = home.map { URL(fileURLWithPath: $0) } ?? ProviderManager.defaultHome()
        let manager = try ProviderManager(
            home: url, registry: AdapterList.registry, logger: Logger(label: "fileprovider.engine").escapingText())
        if checkingMounts { manager.detachUnguardedReplicaMounts() }
        return manager
    }

    @Flag(
        name: .shortAndLong,
        help: ArgumentHelp(
            "Log more: -v a line per item transferred (downloaded, uploaded, moved, deleted), -vv also each request to the store (method, path, status, bytes, time; secrets masked).",
            discussion: "-v is --log-level debug, -vv is --log-level trace."))
    var verbose: Int

    @Flag(name: .shortAndLong, help: "Log errors only.")
    var quiet = false

    @Option(
        help: ArgumentHelp(
            "The least important log messages written: trace, debug, info, notice, warning, error or critical.",
            valueName: "level"))
    var logLevel: String?

    @Option(
        help: ArgumentHelp(
            "Write log messages to this file instead of standard error: appended, mode 0600, a timestamp on each line.",
            valueName: "path"), completion: .file())
    var logFile: String?

    func validate() throws {
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical, not '\(logLevel)'")
        }
    }

    /// The log level asked for: `--log-level`, else `-q` (error), `-vv` (trace), `-v` (debug),
    /// else `standard`.
    func logLevel(default standard: Logger.Level) -> Logger.Level {
        if let level = logLevel.flatMap(Logger.Level.init(rawValue:)) { return level }
        if quiet { return .error }
        if verbose >= 2 { return .trace }
        if verbose == 1 { return .debug }
        return standard
    }
}

/// `--json` for commands that print data.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON for scripts instead of text.")
    var json = false
}
