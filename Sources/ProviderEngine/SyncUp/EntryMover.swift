import Foundation
import ProviderCore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The first step of a ``ReplicaConversion``: renames every entry of the old folder into the new
/// one (a folder with everything inside it in one rename), so files keep their inodes, dates and
/// sizes and the database's fingerprints still tell edits from downloads. An entry in both (a
/// folder made again in the old one) is merged; two files of one name stop the move. Names are
/// moved byte for byte (also names that are not UTF-8). Blocking; a run cut at any entry can be
/// run again.
struct EntryMover {
    /// The old folder and the new one.
    let source: URL
    let destination: URL
    /// Whether to stop at the next entry (the command was interrupted).
    let stopped: @Sendable () -> Bool

    /// Renames every entry of the old folder into the new one; returns how many were moved (a
    /// folder counts once, with everything inside it).
    /// - Throws: `filenameCollision` when a file of one name is in both folders; `cancelled`
    ///   (``ReplicaConversion/interrupted``) when ``stopped`` says so; `localIOFailure` (or the
    ///   code of the failure) naming the file that cannot be moved or the folder that cannot be
    ///   read or removed.
    func moveEntries() throws(FileProviderError) -> Int {
        guard BytePaths.isFolder(source.path) else { return 0 }
        return try move(from: BytePaths.bytes(source.path), to: BytePaths.bytes(destination.path))
    }

    private func move(from: [CChar], to: [CChar]) throws(FileProviderError) -> Int {
        var moved = 0
        for name in try BytePaths.names(in: from) {
            if stopped() { throw ReplicaConversion.interrupted }
            let source = from + [47] + name
            let target = to + [47] + name
            if SystemCalls.renameNoReplace(source + [0], target + [0]) == 0 {
                moved += 1
                continue
            }
            let code = errno
            if code == EEXIST && BytePaths.isFolder(source) && BytePaths.isFolder(target) {
                moved += try move(from: source, to: target)
                if rmdir(source + [0]) != 0 && errno != ENOENT {
                    throw POSIXError.error("cannot remove the emptied folder", path: BytePaths.display(source))
                }
                continue
            }
            if code == EEXIST {
                throw FileProviderError(
                    .filenameCollision,
                    "\(BytePaths.display(source)) and \(BytePaths.display(target)) both exist; move one of them out of the way and run the same command again"
                )
            }
            throw POSIXError.error("cannot move \(BytePaths.display(source)) to", path: BytePaths.display(target), errno: code)
        }
        return moved
    }
}
