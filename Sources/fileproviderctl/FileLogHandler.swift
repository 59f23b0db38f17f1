import Foundation
import Logging
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Writes log lines to a file (`--log-file PATH`), for `serve` and any command run without
/// systemd's journal: appended, the file made (or kept) readable by its owner only (0600, as
/// request lines name paths and servers), one line per message with a timestamp in UTC, the
/// level and the logger's label: `2026-12-05T02:05:11.829Z debug fileprovider.engine: photos:/a.jpg: downloaded`.
/// A message's own line breaks become new lines with the same prefix.
struct FileLogHandler: LogHandler {
    let label: String
    let file: LogFile
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, file: LogFile) {
        self.label = label
        self.file = file
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let suffix =
            merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let prefix = "\(LogFile.timestamp(Date())) \(event.level.rawValue) \(label): "
        var text = ""
        for line in "\(event.message)\(suffix)".split(separator: "\n", omittingEmptySubsequences: false) {
            text += prefix + line + "\n"
        }
        file.write(text)
    }
}

/// An open log file shared by every logger of the process: each line is one `write(2)` to a
/// descriptor opened with `O_APPEND`, so lines of threads and processes never interleave.
final class LogFile: Sendable {
    let path: String
    private let descriptor: Int32

    /// Opens (or creates) `path` for appending, readable and writable by its owner only.
    /// - Throws: `invalidArgument` naming the path and the system's reason when it cannot be
    ///   opened, is not a regular file, or its mode cannot be set to 0600.
    init(path: String) throws(FileProviderError) {
        self.path = path
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0o600)
        guard fd >= 0 else {
            throw FileProviderError(
                .invalidArgument, "--log-file \(path): \(String(cString: strerror(errno))); give a file in a folder you can write")
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw FileProviderError(.invalidArgument, "--log-file \(path): not a regular file")
        }
        // An existing file another program made readable to others is made private: request
        // lines name paths and servers.
        if info.st_mode & 0o077 != 0, fchmod(fd, 0o600) != 0 {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw FileProviderError(.invalidArgument, "--log-file \(path): cannot make it private (mode 0600): \(reason)")
        }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// Appends `text` in one write (retried after an interruption or a short write).
    func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// `2026-12-05T02:05:11.829Z`: UTC with milliseconds, without DateFormatter.
    static func timestamp(_ date: Date) -> String {
        let text = Output.jsonDate(date)
        // jsonDate writes microseconds: keep milliseconds.
        guard let dot = text.firstIndex(of: ".") else { return text }
        return String(text[...dot]) + String(text[text.index(after: dot)...].prefix(3)) + "Z"
    }
}
