import Foundation
import ProviderCore

extension SFTPBackend {
    /// Deletes an item; a folder with everything in it when `options` has `recursive`.
    ///
    /// A recursive deletion first renames the folder to a hidden staging name, so the item
    /// disappears at once, then removes its contents without following symlinks.
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when its version is not
    ///   `baseVersion`; `directoryNotEmpty` for a non-empty folder without `recursive` (one
    ///   holding only this backend's staging files is deleted with them);
    ///   `deletionRejected` for the root; `permissionDenied` naming the path.
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        let path = try SFTPPath(identifier)
        if path.isRoot { throw FileProviderError(.deletionRejected, "the root of a domain cannot be deleted") }
        try await withConnection(operation: options.contains(.recursive) ? "REMOVE -R" : "REMOVE", path: path) {
            connection throws(FileProviderError) in
            let located = try self.locate(path, on: connection)
            try Self.check(located.item, against: baseVersion)
            guard located.item.kind == .folder else {
                try connection.unlink(located.remote)
                return
            }
            if !options.contains(.recursive) {
                do throws(FileProviderError) {
                    try connection.rmdir(located.remote)
                } catch {
                    if connection.isDead { throw error }
                    let directory = try connection.openDirectory(located.remote)
                    var staged: [String] = []
                    while let entry = try directory.nextEntry() {
                        if entry.name == Array(".".utf8) || entry.name == Array("..".utf8) { continue }
                        // Staging files of uploads into the folder that were cut short (or are
                        // under way: that upload fails at its rename and is sent again) hold
                        // nothing the store must keep; anything else does.
                        guard let name = Filename.decode(entry.name), StagingName.matches(name), entry.attributes.kind != .folder else {
                            throw FileProviderError(.directoryNotEmpty, "\(path.display) is not empty")
                        }
                        staged.append(name)
                    }
                    try? directory.close()
                    if staged.isEmpty { throw error }
                    for name in staged { try connection.unlink(located.remote + "/" + name) }
                    try connection.rmdir(located.remote)
                }
                return
            }
            let staging = path.parent.remote(under: connection.rootPath) + "/" + SFTPPath.stagingName()
            try connection.rename(located.remote, to: staging)
            try self.removeTree(staging, on: connection)
        }
    }

    /// Removes a folder and everything in it, never following symlinks.
    private func removeTree(_ remote: String, on connection: SFTPConnection) throws(FileProviderError) {
        let directory = try connection.openDirectory(remote)
        var children: [(name: [UInt8], attributes: RemoteAttributes)] = []
        while let entry = try directory.nextEntry() {
            if entry.name != Array(".".utf8) && entry.name != Array("..".utf8) { children.append(entry) }
        }
        try? directory.close()
        for (name, attributes) in children {
            // Names from the server may be any bytes but '/' and NUL; they are used only below `remote`.
            let child = remote + "/" + String(decoding: name, as: UTF8.self)
            guard Filename.decode(name) != nil else {
                throw FileProviderError(.deletionRejected, "\(remote) holds a name that is not UTF-8; it cannot be removed from here")
            }
            if attributes.kind == .folder {
                try removeTree(child, on: connection)
            } else {
                try connection.unlink(child)
            }
        }
        try connection.rmdir(remote)
    }
}
