import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A shell script a test writes and then runs (a stand-in for `ssh`, `fusermount3`, …).
public enum ExecutableScript {
    /// Writes `text` to a new executable file at `path` (mode 0755) through a close-on-exec
    /// descriptor: `Data.write(to:)` opens without it, so a program another test started at that
    /// moment kept the file open for writing, and running the script failed with "Text file
    /// busy" (`ETXTBSY`).
    /// - Throws: `localIOFailure` when the file cannot be created or written.
    public static func write(_ text: String, to path: String) throws(FileProviderError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
        guard fd >= 0 else { throw POSIXError.localWriteError("create", path: path) }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if count < 0 {
                if errno == EINTR { continue }
                throw POSIXError.localWriteError("write", path: path)
            }
            done += count
        }
        guard fchmod(fd, 0o755) == 0 else { throw POSIXError.localWriteError("chmod", path: path) }
    }
}
