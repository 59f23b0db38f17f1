import Foundation
import ProviderCore

/// A path inside a media backend's root (see ``ProviderCore/ItemPath``).
typealias MediaPath = ItemPath

extension ItemPath {
    /// The prefix of media-server's unfinished uploads; such names are never created.
    static let uploadPrefix = ".media-upload-"

    /// Whether a name may be used as a child of this folder.
    func allowsChild(named name: String) -> Bool { allowsChild(named: name, reservedPrefix: Self.uploadPrefix) }
}
