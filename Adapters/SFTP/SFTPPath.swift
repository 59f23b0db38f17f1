import Foundation
import ProviderCore

/// A path inside an SFTP backend's root, as safe name components; derived from an identifier.
///
/// The root is ``ItemIdentifier/rootContainer``; every other item's identifier is its path
/// relative to the root, such as `docs/a.txt`.
struct SFTPPath: Sendable, Hashable {
    /// The names from the root down; empty for the root.
    var components: [String]

    static let root = SFTPPath(components: [])

    /// Identifiers a top-level item may not take, because they name special containers.
    static let reservedNames: Set<String> = [
        ItemIdentifier.rootContainer.rawValue, ItemIdentifier.trashContainer.rawValue,
        ItemIdentifier.workingSet.rawValue,
    ]

    init(components: [String]) { self.components = components }

    /// The path an identifier names.
    ///
    /// - Throws: `noSuchItem` when the identifier cannot name an item of this store (an unsafe
    ///   component, an empty one, or a special container other than the root).
    init(_ identifier: ItemIdentifier) throws(FileProviderError) {
        if identifier == .rootContainer {
            components = []
            return
        }
        let parts = identifier.rawValue.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        var names: [String] = []
        names.reserveCapacity(parts.count)
        for part in parts {
            guard let name = String(part), Filename.isValid(name) else { throw .noSuchItem(identifier) }
            names.append(name)
        }
        if names.count == 1 && Self.reservedNames.contains(names[0]) { throw .noSuchItem(identifier) }
        components = names
    }

    var isRoot: Bool { components.isEmpty }

    /// The item's identifier.
    var identifier: ItemIdentifier {
        isRoot ? .rootContainer : ItemIdentifier(components.joined(separator: "/"))
    }

    /// The folder holding this item (the root for the root).
    var parent: SFTPPath { SFTPPath(components: Array(components.dropLast())) }

    /// The last name; empty for the root.
    var name: String { components.last ?? "" }

    func appending(_ name: String) -> SFTPPath { SFTPPath(components: components + [name]) }

    /// Whether `other` is this path or inside it.
    func contains(_ other: SFTPPath) -> Bool {
        other.components.count >= components.count
            && zip(components, other.components).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
    }

    /// The path for messages: `/` for the root, else `/docs/a.txt`.
    var display: String { "/" + components.joined(separator: "/") }

    /// The absolute path on the server under `root` (an absolute, resolved folder path).
    func remote(under root: String) -> String {
        if isRoot { return root }
        return (root == "/" ? "" : root) + "/" + components.joined(separator: "/")
    }

    /// The prefix of the backend's own staging files; such names are never listed or created.
    static let stagingPrefix = ".fileprovider-staging-"

    /// Whether a name may be used as a child of this folder.
    func allowsChild(named name: String) -> Bool {
        Filename.isValid(name) && !(isRoot && Self.reservedNames.contains(name))
            && !name.utf8.starts(with: Self.stagingPrefix.utf8)
    }

    /// A fresh staging name for a file being written in a folder.
    static func stagingName() -> String { stagingPrefix + UUID().uuidString }
}
