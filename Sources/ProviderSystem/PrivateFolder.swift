import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The folders of the state folder that only their owner may open: the state folder itself
/// (it holds the database, which names every path of every domain) and the `locks`, `staging`
/// and `signals` folders in it. Replica folders are not among them: they are the user's files
/// and keep the modes the user's umask gives them.
package enum PrivateFolder {
    /// `rwx------`.
    package static let mode: mode_t = 0o700

    /// The folders below the state folder made private with it.
    package static let inHome = ["locks", "locks/sync", "staging", "signals"]

    /// Makes the state folder and ``inHome`` private: creates what is missing with mode 0700
    /// (folders above the state folder too, as the XDG base directory specification asks) and
    /// takes group and other permissions away from folders an older version made 0755.
    /// - Throws: `localIOFailure` naming the folder that cannot be made.
    package static func makeHome(_ home: URL) throws(FileProviderError) {
        try make(atPath: home.path)
        for relative in inHome { try make(atPath: home.appendingPathComponent(relative).path) }
    }

    /// Makes a folder (and missing folders above it) with mode 0700; an existing folder loses
    /// its group and other permissions. A folder of another owner is left as it is (only its
    /// owner may change its mode).
    /// - Throws: `localIOFailure` naming the folder when it cannot be made.
    package static func make(atPath path: String) throws(FileProviderError) {
        if mkdir(path, mode) == 0 { return }
        var code = errno
        if code == ENOENT {
            let parent = (path as NSString).deletingLastPathComponent
            if !parent.isEmpty && parent != path {
                try make(atPath: parent)
                if mkdir(path, mode) == 0 { return }
                code = errno
            }
        }
        var info = stat()
        guard code == EEXIST, stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw FileProviderError(.localIOFailure, "cannot create the folder \(path): \(String(cString: strerror(code)))")
        }
        tighten(path, info)
    }

    /// Takes group and other permissions away from an existing file or folder, when it has any.
    package static func tighten(_ path: String, _ info: stat) {
        if info.st_mode & 0o077 != 0 && info.st_uid == geteuid() {
            _ = chmod(path, info.st_mode & 0o7700)
        }
    }
}
