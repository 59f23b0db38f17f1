import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// How far sync down goes into a store's tree. A store that lists a folder inside itself (the
/// same identifier again below it, or, with identifiers derived from paths, an endless
/// `a/a/a/…`) would be walked forever; these bounds stop the walk there with a notice, and the
/// rest of the sync goes on.
enum WalkBounds {
    /// The deepest an item may be below the replica's root, in path components: 256 levels.
    static let maximumDepth = 256

    /// The longest full path of anything the engine writes in the replica, in bytes: Linux's
    /// `PATH_MAX` (4096) less its terminating NUL.
    static let maximumPathLength = Int(PATH_MAX) - 1

    /// Why an item of the store may not be placed at `path` (relative to a replica root of
    /// `rootLength` bytes), or `nil`: deeper than ``maximumDepth``, or a full path (with the
    /// `.placeholder` suffix of a file or symlink) longer than ``maximumPathLength``.
    static func problem(placing kind: ItemKind, at path: String, rootLength: Int) -> String? {
        var depth = 1
        var length = 0
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") { depth += 1 }
            length += 1
        }
        // Only a refusal names the item: a walk checks every item of the store.
        var name: String { path.utf8.split(separator: UInt8(ascii: "/")).last.map { String(decoding: $0, as: UTF8.self) } ?? path }
        if depth > maximumDepth {
            return
                "\(name.debugDescription) is \(depth) folders deep; the limit is \(maximumDepth) (a folder that contains itself?), so nothing below was walked"
        }
        let full = rootLength + 1 + length + (kind == .folder ? 0 : Replica.placeholderSuffix.utf8.count)
        if full > maximumPathLength {
            return
                "\(name.debugDescription): its path in the replica would be \(full) bytes long; the limit is \(maximumPathLength) (PATH_MAX)"
        }
        return nil
    }

    /// Why a folder listed inside the folders `ancestors` (its parent last) is not walked, or
    /// `nil`: its identifier is one of theirs, so the store lists it inside itself.
    static func problem(listing item: Item, inside ancestors: [ItemIdentifier]) -> String? {
        guard item.kind == .folder, ancestors.contains(item.identifier) else { return nil }
        return
            "the folder \(item.filename.debugDescription) is listed inside itself (its identifier \(item.identifier.rawValue.debugDescription) is already on the path from the root); not walked further"
    }
}
