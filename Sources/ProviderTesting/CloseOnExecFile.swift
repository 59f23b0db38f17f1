import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Files a test holds open while another test may start programs.
public enum CloseOnExecFile {
    /// Opens the file at `url` for reading through a close-on-exec descriptor.
    /// `FileHandle(forReadingFrom:)` opens without it: a server another test started meanwhile
    /// (sshd, Apache) inherited the descriptor and kept the file open after the test closed it,
    /// so an eviction that takes a lease on the file found it still open.
    /// - Throws: `noSuchItem` when the file is missing; `localIOFailure` when it cannot be opened.
    public static func reading(_ url: URL) throws(FileProviderError) -> FileHandle {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError.error("cannot open", path: url.path) }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }
}
