import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Paths as bytes, for the files of a replica whose names need not be UTF-8 (a conversion moves
/// and keeps them byte for byte). Blocking.
package enum BytePaths {
    /// The names in a folder (without `.` and `..`), as bytes.
    /// - Throws: `localIOFailure` (or the code of the failure) naming the folder.
    package static func names(in folder: [CChar]) throws(FileProviderError) -> [[CChar]] {
        guard let directory = opendir(folder + [0]) else { throw POSIXError.error("cannot read the folder", path: display(folder)) }
        defer { closedir(directory) }
        var names: [[CChar]] = []
        while let entry = readdir(directory) {
            let name = DirectoryEntry.nameBytes(of: entry).map { CChar(bitPattern: $0) }
            if name == [46] || name == [46, 46] { continue }
            names.append(name)
        }
        return names
    }

    /// Whether `path` is a folder (not a link to one).
    package static func isFolder(_ path: [CChar]) -> Bool {
        var info = stat()
        return lstat(path + [0], &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    package static func isFolder(_ path: String) -> Bool { isFolder(bytes(path)) }

    /// A path's bytes, without the terminating zero.
    package static func bytes(_ path: String) -> [CChar] { Array(path.utf8CString.dropLast()) }

    /// A path for messages: quoted when its bytes must not reach a terminal as they are.
    package static func display(_ path: [CChar]) -> String { TerminalText.quoted(bytes: path.map { UInt8(bitPattern: $0) }) }

    /// Whether two existing paths are on one file system.
    package static func sameFileSystem(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_dev == second.st_dev
    }
}
