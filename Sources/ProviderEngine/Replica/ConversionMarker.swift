import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The marker of an unfinished conversion of a domain's replica mode:
/// `<home>/conversions/<name>` (``ProviderManager/conversionMarkerPath(forDomainNamed:)``),
/// holding the target mode. Written before a conversion moves anything, removed once the new
/// mode is recorded; while it is there, no engine work starts on the domain.
enum ConversionMarker {
    /// The mode written in a conversion marker file, or `nil` when there is none.
    static func target(atPath path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "?" : text
    }

    /// Writes the marker: the target mode, in a complete file (a temporary file synced, then
    /// renamed into place).
    /// - Throws: `localIOFailure` naming the file.
    static func write(_ mode: ReplicaMode, atPath path: String) throws(FileProviderError) {
        do throws(FileProviderError) {
            try PrivateFolder.make(atPath: (path as NSString).deletingLastPathComponent)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot create the conversions folder for \(path): \(error.message)")
        }
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if fd < 0 { throw POSIXError.error("cannot write the conversion marker", path: temporary) }
        let bytes = Array((mode.rawValue + "\n").utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        if written != bytes.count || synced != 0 {
            unlink(temporary)
            throw POSIXError.error("cannot write the conversion marker", path: temporary)
        }
        try POSIXError.check(rename(temporary, path), "cannot write the conversion marker", path: path)
    }

    /// The refusal of engine work while a conversion of `domain` to `target` is unfinished.
    static func unfinished(_ domain: String, _ target: String) -> FileProviderError {
        FileProviderError(
            .providerDomainTemporarilyUnavailable,
            "the conversion of domain '\(domain)' to \(target) did not finish (its files may be in two folders); finish it with 'fileproviderctl domain convert \(domain) --mode \(target)'"
        )
    }
}
