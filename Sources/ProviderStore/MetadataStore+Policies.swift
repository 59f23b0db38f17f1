import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// Sets the content policy of the item at `path` (`nil`: it inherits its folder's), and with
    /// `clearingBelow` removes the policies set on the items below it, so the whole subtree
    /// follows it; in one transaction. Writes only the `contentPolicy` column: a sync or a
    /// download writing the same rows meanwhile keeps its changes.
    /// - Returns: the paths below `path` whose own policies were removed, sorted.
    /// - Throws: `noSuchItem` when the domain has no item at `path`; `localIOFailure` when the
    ///   database fails.
    @discardableResult
    public func setContentPolicy(_ policy: ContentPolicy?, domainID: Int64, path: String, clearingBelow: Bool)
        throws(FileProviderError) -> [String]
    {
        let cleared = try write { db -> [String]? in
            try db.execute(
                sql: "UPDATE item SET contentPolicy = ? WHERE domainID = ? AND path = ?",
                arguments: [policy?.rawValue, domainID, path])
            guard db.changesCount == 1 else { return nil }
            guard clearingBelow else { return [] }
            // Every path that starts with "path/": "/" is 0x2F, the next byte is "0". Below the
            // root is every other path.
            let (condition, arguments): (String, StatementArguments) =
                path.isEmpty
                ? ("path <> ''", [domainID])
                : ("path >= ? AND path < ?", [domainID, path + "/", path + "0"])
            let below = try String.fetchAll(
                db,
                sql: "SELECT path FROM item INDEXED BY item_policy WHERE domainID = ? AND contentPolicy IS NOT NULL AND \(condition)",
                arguments: arguments)
            if below.isEmpty { return [] }
            try db.execute(
                sql: "UPDATE item SET contentPolicy = NULL WHERE domainID = ? AND contentPolicy IS NOT NULL AND \(condition)",
                arguments: arguments)
            return below.sorted()
        }
        guard let cleared else { throw FileProviderError(.noSuchItem, "no item at \(path.debugDescription)") }
        return cleared
    }
}

extension EvictionCandidate {
    /// A candidate for `record`'s file, holding `bytes` (partly, with `isPartial`), never used.
    public static func file(_ record: ItemRecord, bytes: Int64, isPartial: Bool) -> EvictionCandidate {
        EvictionCandidate(
            identifier: record.identifier, path: record.path, isPartial: isPartial, bytes: bytes, lastUsedAt: 0,
            contentPolicy: record.contentPolicy)
    }
}
