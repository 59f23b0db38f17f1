import Foundation
import ProviderCore

/// Where the items with stable identifiers (`oc:fileid`, `--vendor nextcloud|owncloud`) were
/// last seen: identifier to path and back, filled by every listing, lookup and write, and
/// kept right across the adapter's own moves and deletions. A miss is resolved by a walk of
/// the tree (``WebDAVBackend/resolve(_:)``), so the map may forget: it holds at most
/// ``limit`` places and starts again empty when it would hold more (bounded memory, about
/// 200 bytes a place).
final class IdentifierMap: @unchecked Sendable {
    /// The most places kept.
    static let limit = 500_000

    private let lock = NSLock()
    private var paths: [ItemIdentifier: ItemPath] = [:]
    /// By the bytes of the path: Swift's `String` equality would take an NFC and an NFD name
    /// for one.
    private var identifiers: [Data: (path: ItemPath, identifier: ItemIdentifier)] = [:]

    private static func key(_ path: ItemPath) -> Data { Data(path.components.joined(separator: "/").utf8) }

    func path(of identifier: ItemIdentifier) -> ItemPath? { lock.withLock { paths[identifier] } }

    func identifier(at path: ItemPath) -> ItemIdentifier? { lock.withLock { identifiers[Self.key(path)]?.identifier } }

    /// Records that `identifier` is at `path` (and nothing else is).
    func remember(_ identifier: ItemIdentifier, at path: ItemPath) {
        lock.withLock {
            if let old = paths[identifier] { identifiers[Self.key(old)] = nil }
            if let other = identifiers[Self.key(path)]?.identifier, other != identifier { paths[other] = nil }
            if paths[identifier] == nil, paths.count >= Self.limit {
                paths.removeAll()
                identifiers.removeAll()
            }
            paths[identifier] = path
            identifiers[Self.key(path)] = (path, identifier)
        }
    }

    /// Forgets everything at or below `path`.
    func forget(below path: ItemPath) {
        lock.withLock {
            for (key, entry) in identifiers where path.contains(entry.path) {
                identifiers[key] = nil
                paths[entry.identifier] = nil
            }
        }
    }

    /// Moves everything at or below `source` to the same place below `target`.
    func move(_ source: ItemPath, to target: ItemPath) {
        lock.withLock {
            let moved = identifiers.filter { source.contains($0.value.path) }
            for key in moved.keys { identifiers[key] = nil }
            for entry in moved.values {
                let path = ItemPath(components: target.components + entry.path.components.dropFirst(source.components.count))
                identifiers[Self.key(path)] = (path, entry.identifier)
                paths[entry.identifier] = path
            }
        }
    }
}
