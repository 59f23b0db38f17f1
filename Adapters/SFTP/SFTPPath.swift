import Foundation
import ProviderCore

/// A path inside an SFTP backend's root (see ``ProviderCore/ItemPath``).
typealias SFTPPath = ItemPath

extension ItemPath {
    /// The absolute path on the server under `root` (an absolute, resolved folder path).
    func remote(under root: String) -> String {
        if isRoot { return root }
        return (root == "/" ? "" : root) + "/" + components.joined(separator: "/")
    }

    /// The prefix of the backend's own staging files; such names are never listed or created.
    static let stagingPrefix = StagingName.prefix

    /// Whether a name may be used as a child of this folder.
    func allowsChild(named name: String) -> Bool { allowsChild(named: name, reservedPrefix: Self.stagingPrefix) }

    /// A fresh staging name for a file being written in a folder.
    static func stagingName() -> String { StagingName.make() }
}
