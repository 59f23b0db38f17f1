import Foundation
import ProviderCore

/// A path inside a local backend's root (see ``ProviderCore/ItemPath``).
typealias LocalPath = ItemPath

extension ItemPath {
    /// The prefix of the backend's own staging files; such names are never listed or created.
    static let stagingPrefix = StagingName.prefix

    /// Whether a name may be used as a child of this folder.
    func allowsChild(named name: String) -> Bool { allowsChild(named: name, reservedPrefix: Self.stagingPrefix) }

    /// A fresh staging name for a file being written in this folder.
    static func stagingName() -> String { StagingName.make() }
}
