/// A path inside a domain's replica, relative to its root, as the engine and the database keep
/// it: names joined by `/`, no leading or trailing slash, `""` for the root.
///
/// Compared and cut byte for byte (UTF-8): two names that are canonically equivalent but
/// spelled differently (`é` precomposed, `e` + combining acute) are different items, as they are
/// on disk, and a name that starts with a combining mark stays a name of its own. The value is
/// taken as it is, never normalised: a path with a trailing slash (`a/b/`) ends in an empty name,
/// which no item has.
public struct RelativePath: Sendable, Hashable, CustomStringConvertible {
    /// The path, exactly as given.
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The root of the replica.
    public static let root = RelativePath("")

    public var isRoot: Bool { rawValue.isEmpty }

    public var description: String { rawValue }

    /// The folder path and the name: `a/b/c.txt` gives `a/b` and `c.txt`; a path without a
    /// slash has the root (`""`) as its folder; the root gives `""` and `""`.
    public var split: (parent: String, name: String) {
        let bytes = rawValue.utf8
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return ("", rawValue) }
        return (String(Substring(bytes[..<slash])), String(Substring(bytes[bytes.index(after: slash)...])))
    }

    /// The path of the folder holding the item (`""` for an item at the root, and for the root).
    public var parent: String { split.parent }

    /// The last name (the whole path for an item at the root; `""` for the root).
    public var name: String { split.name }

    /// The path of the item `name` inside this folder.
    public func appending(_ name: String) -> String {
        isRoot ? name : rawValue + "/" + name
    }

    /// The folders above the item, nearest first, ending with the first name below the root
    /// (`a/b/c` gives `a/b`, `a`); none for an item at the root or the root.
    public var ancestors: [String] {
        var found: [String] = []
        var current = parent
        while !current.isEmpty {
            found.append(current)
            current = RelativePath(current).parent
        }
        return found
    }

    /// Whether this path is `folder` or lies below it; the root (`""`) is above everything.
    /// `a/bc` is not below `a/b`; a `folder` with a trailing slash has nothing below it.
    public func isAtOrBelow(_ folder: String) -> Bool {
        if folder.isEmpty { return true }
        let (path, prefix) = (rawValue.utf8, folder.utf8)
        guard path.starts(with: prefix) else { return false }
        if path.count == prefix.count { return true }
        return path[path.index(path.startIndex, offsetBy: prefix.count)] == UInt8(ascii: "/")
    }
}
