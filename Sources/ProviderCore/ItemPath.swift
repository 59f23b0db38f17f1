/// A path inside a path-addressed store, as safe name components, for backends whose
/// identifiers are derived from paths (all built-in ones).
///
/// The root is ``ItemIdentifier/rootContainer``; every other item's identifier is its path
/// relative to the store's root, such as `docs/a.txt`.
public struct ItemPath: Sendable, Hashable {
    /// The names from the root down; empty for the root.
    public var components: [String]

    public static let root = ItemPath(components: [])

    /// Identifiers a top-level item may not take, because they name special containers.
    public static let reservedNames: Set<String> = [
        ItemIdentifier.rootContainer.rawValue, ItemIdentifier.trashContainer.rawValue,
        ItemIdentifier.workingSet.rawValue,
    ]

    public init(components: [String]) { self.components = components }

    /// The path an identifier names.
    ///
    /// - Throws: `noSuchItem` when the identifier cannot name an item of the store (an unsafe
    ///   component, an empty one, or a special container other than the root).
    public init(_ identifier: ItemIdentifier) throws(FileProviderError) {
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

    public var isRoot: Bool { components.isEmpty }

    /// The item's identifier.
    public var identifier: ItemIdentifier {
        isRoot ? .rootContainer : ItemIdentifier(components.joined(separator: "/"))
    }

    /// The folder holding this item (the root for the root).
    public var parent: ItemPath { ItemPath(components: Array(components.dropLast())) }

    /// The last name; empty for the root.
    public var name: String { components.last ?? "" }

    public func appending(_ name: String) -> ItemPath { ItemPath(components: components + [name]) }

    /// Whether `other` is this path or inside it (names compared byte for byte).
    public func contains(_ other: ItemPath) -> Bool {
        other.components.count >= components.count
            && zip(components, other.components).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
    }

    /// The path for messages: `/` for the root, else `/docs/a.txt`.
    public var display: String { "/" + components.joined(separator: "/") }

    /// Whether a name may be used for a child of this folder: a safe name, not a special
    /// container's identifier at the top level, and not starting with the backend's own
    /// `reservedPrefix` (its temporary files).
    public func allowsChild(named name: String, reservedPrefix: String) -> Bool {
        Filename.isValid(name) && !(isRoot && Self.reservedNames.contains(name))
            && !name.utf8.starts(with: reservedPrefix.utf8)
    }
}
