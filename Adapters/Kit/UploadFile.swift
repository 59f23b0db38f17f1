import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The local file an upload sends (`createItem`'s and `modifyItem`'s contents), as every HTTP
/// adapter checks it before it sends a byte.
package enum UploadFile {
    /// The size of the file to upload (0 for `/dev/null`, which the engine gives for an empty
    /// file).
    ///
    /// - Throws: `localIOFailure` when it cannot be read or is not a regular file.
    package static func size(atPath path: String) throws(FileProviderError) -> Int64 {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw FileProviderError(.localIOFailure, "the file to upload \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        if path == "/dev/null" { return 0 }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw FileProviderError(.localIOFailure, "the file to upload \(path) is not a regular file")
        }
        return Int64(info.st_size)
    }
}
