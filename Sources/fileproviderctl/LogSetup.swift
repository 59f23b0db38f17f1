import Foundation
import Logging
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Where log lines go: standard error, with a timestamp and the level in words on a terminal or
/// in a file; with a syslog priority prefix (`<6>`, as `sd-daemon.h`'s `SD_INFO`) and no
/// timestamp when standard error is connected to the journal, which records both itself; or,
/// with `--log-file PATH`, that file only (``FileLogHandler``).
enum LogSetup {
    /// Sets up swift-log for the process (once; later calls do nothing) at `level`, writing to
    /// `file` when one is given.
    /// - Throws: `invalidArgument` when `file` cannot be opened (``LogFile/init(path:)``).
    static func bootstrap(
        level: Logger.Level, file: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(FileProviderError) {
        let logFile = try file.map { path throws(FileProviderError) in try LogFile(path: path) }
        let journal = isJournalStream(environment)
        guard
            !bootstrapped.withLock({ done in
                defer { done = true }
                return done
            })
        else { return }
        // Every logger's messages escaped for a terminal, the adapters' own too: a name from a
        // store in any log line cannot recolour or rewrite the screen, or forge a line.
        LoggingSystem.bootstrap { label in
            if let logFile {
                var handler = FileLogHandler(label: label, file: logFile)
                handler.logLevel = level
                return EscapingLogHandler(wrapped: handler)
            }
            if journal {
                var handler = JournalLogHandler(label: label)
                handler.logLevel = level
                return EscapingLogHandler(wrapped: handler)
            }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return EscapingLogHandler(wrapped: handler)
        }
    }

    private static let bootstrapped = LockedFlag()

    /// Whether standard error is the journal's stream: `$JOURNAL_STREAM` is `device:inode` of the
    /// stream systemd connected, and it names standard error itself (a child whose standard
    /// error was redirected elsewhere inherits the variable but not the stream), as
    /// `systemd.exec(5)` says to check.
    static func isJournalStream(_ environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}

/// A flag set once, under a lock.
private final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    func withLock<Result>(_ body: (inout Bool) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Writes log lines for journald: `<priority>message key=value…`, one line each (a
/// message's own line breaks become new lines with the same prefix), no timestamp.
struct JournalLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The `sd-daemon.h` priority of a level: `SD_DEBUG` (7) for trace and debug, `SD_INFO`
    /// (6), `SD_NOTICE` (5), `SD_WARNING` (4), `SD_ERR` (3), `SD_CRIT` (2).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let suffix =
            merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let prefix = "<\(Self.priority(event.level))>"
        var text = ""
        for line in "\(event.message)\(suffix)".split(separator: "\n", omittingEmptySubsequences: false) {
            text += prefix + line + "\n"
        }
        FileHandle.standardError.write(Data(text.utf8))
    }
}
