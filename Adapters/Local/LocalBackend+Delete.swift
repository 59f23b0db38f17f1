import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension LocalBackend {
    /// Deletes an item; a folder with everything in it when `options` has `recursive`.
    ///
    /// A recursive deletion first renames the folder to a hidden staging name, so the item
    /// disappears at once, then removes its contents without following symlinks.
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when its version is not
    ///   `baseVersion`; `directoryNotEmpty` for a non-empty folder without `recursive` (one
    ///   holding only staging files nobody writes is deleted with them);
    ///   `deletionRejected` for the root.
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        let path = try LocalPath(identifier)
        if path.isRoot { throw FileProviderError(.deletionRejected, "the root of a domain cannot be deleted") }
        try await io { () throws(FileProviderError) in
            let located = try self.currentItem(at: path)
            try Self.check(located.item, against: baseVersion)
            guard located.item.kind == .folder else {
                try located.parent.remove(path.name, folder: false, displayPath: path.display)
                return
            }
            if !options.contains(.recursive) {
                do throws(FileProviderError) {
                    try located.parent.remove(path.name, folder: true, displayPath: path.display)
                } catch where error.code == .filenameCollision || error.code == .directoryNotEmpty {
                    // Only abandoned staging files of uploads cut short (never listed): they
                    // go, and the folder with them.
                    guard try self.reapStagingFiles(in: located.parent, path) else {
                        throw FileProviderError(.directoryNotEmpty, "\(path.display) is not empty")
                    }
                    try located.parent.remove(path.name, folder: true, displayPath: path.display)
                }
                return
            }
            let staging = LocalPath.stagingName()
            try Rename.replacing(from: located.parent, path.name, to: located.parent, staging, displayPath: path.display)
            try located.parent.removeTree(Array(staging.utf8), displayPath: path.display)
        }
    }

    /// Removes the abandoned staging files in the folder `path` (``reapStagingFile(_:in:displayPath:)``);
    /// returns whether the folder holds nothing else now.
    /// - Throws: `localIOFailure` when the folder cannot be read.
    private func reapStagingFiles(in parent: FileHandleFD, _ path: LocalPath) throws(FileProviderError) -> Bool {
        let folder = try parent.openFolder(path.name, displayPath: path.display)
        for raw in try folder.entryNames(displayPath: path.display) {
            guard let name = Filename.decode(raw), StagingName.matches(name) else { return false }
            reapStagingFile(name, in: folder, displayPath: path.appending(name).display)
        }
        return try folder.entryNames(displayPath: path.display).isEmpty
    }
}
