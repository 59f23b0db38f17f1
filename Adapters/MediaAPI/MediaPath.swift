import Foundation
import ProviderCore

/// A path inside a media domain, as safe name components; derived from an identifier.
///
/// The root is ``ItemIdentifier/rootContainer``; every other item's identifier is its path
/// relative to the domain's root folder on the server, such as `2024/beach.jpg`.
struct MediaPath: Sendable {
    /// The names from the domain root down; empty for the root.
    var components: [String]

    static let root = MediaPath(components: [])

    /// Identifiers a top-level item may not take, because they name special containers.
    static let reservedNames: Set<String> = [
        ItemIdentifier.rootContainer.rawValue, ItemIdentifier.trashContainer.rawValue,
        ItemIdentifier.workingSet.rawValue,
    ]

    /// The prefix of media-server's unfinished uploads; such names are never created.
    static let uploadPrefix = ".media-upload-"

    init(components: [String]) { self.components = components }

    /// The path an identifier names.
    ///
    /// - Throws: `noSuchItem` when the identifier cannot name an item of this store.
    init(_ identifier: ItemIdentifier) throws(FileProviderError) {
        if identifier == .rootContainer {
            components = []
            return
        }
        var names: [String] = []
        for part in identifier.rawValue.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            guard let name = String(part), Filename.isValid(name) else { throw .noSuchItem(identifier) }
            names.append(name)
        }
        if names.count == 1 && Self.reservedNames.contains(names[0]) { throw .noSuchItem(identifier) }
        components = names
    }

    var isRoot: Bool { components.isEmpty }

    var identifier: ItemIdentifier {
        isRoot ? .rootContainer : ItemIdentifier(components.joined(separator: "/"))
    }

    var parent: MediaPath { MediaPath(components: Array(components.dropLast())) }

    /// The last name; empty for the root.
    var name: String { components.last ?? "" }

    func appending(_ name: String) -> MediaPath { MediaPath(components: components + [name]) }

    /// The path for messages: `/` for the root, else `/2024/beach.jpg`.
    var display: String { "/" + components.joined(separator: "/") }

    /// Whether a name may be used as a child of this folder.
    func allowsChild(named name: String) -> Bool {
        Filename.isValid(name) && !(isRoot && Self.reservedNames.contains(name))
            && !name.utf8.starts(with: Self.uploadPrefix.utf8)
    }
}
