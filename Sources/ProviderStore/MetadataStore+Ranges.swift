import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// The byte ranges of an item's file that are on disk for `contentVersion`, sorted, merged.
    /// Ranges recorded for another content version are not returned (they are stale).
    /// - Throws: `localIOFailure` when the database fails.
    public func presentRanges(domainID: Int64, identifier: ItemIdentifier, contentVersion: Data) throws(FileProviderError)
        -> [Range<Int64>]
    {
        try read { db in try Self.presentRanges(domainID: domainID, identifier: identifier, contentVersion: contentVersion, in: db) }
    }

    /// Records that bytes `range` of an item's file, of `contentVersion`, are on disk (call it only
    /// after they are: written and flushed). Merges the range with those it touches, and drops
    /// ranges of other content versions, in one transaction — only while the item's content
    /// version is `contentVersion` (bytes of an older version are never recorded).
    /// - Returns: the item's present ranges after the change, or `nil` when the item is gone,
    ///   has another content version or is downloaded whole (nothing was recorded).
    /// - Throws: `localIOFailure` when the database fails.
    @discardableResult
    public func addPresentRange(_ range: Range<Int64>, domainID: Int64, identifier: ItemIdentifier, contentVersion: Data)
        throws(FileProviderError) -> [Range<Int64>]?
    {
        try write { db -> [Range<Int64>]? in
            let current = try Data.fetchOne(
                db.cachedStatement(sql: "SELECT contentVersion FROM item WHERE domainID = ? AND identifier = ? AND state = 'placeholder'"),
                arguments: [domainID, identifier.rawValue])
            guard current == contentVersion else { return nil }
            try db.execute(
                sql: "DELETE FROM presentRange WHERE domainID = ? AND identifier = ? AND contentVersion <> ?",
                arguments: [domainID, identifier.rawValue, contentVersion])
            var ranges = try Self.presentRanges(domainID: domainID, identifier: identifier, contentVersion: contentVersion, in: db)
            guard !range.isEmpty else { return ranges }
            ranges = Self.merged(ranges + [range])
            try db.execute(
                sql: "DELETE FROM presentRange WHERE domainID = ? AND identifier = ?", arguments: [domainID, identifier.rawValue])
            let insert = try db.cachedStatement(
                sql: "INSERT INTO presentRange (domainID, identifier, contentVersion, start, \"end\") VALUES (?, ?, ?, ?, ?)")
            for present in ranges {
                try insert.execute(arguments: [domainID, identifier.rawValue, contentVersion, present.lowerBound, present.upperBound])
            }
            return ranges
        }
    }

    /// Forgets an item's present ranges (its file was evicted, completed, replaced or removed).
    /// - Throws: `localIOFailure` when the database fails.
    public func removePresentRanges(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) {
        try write { db in
            try db.execute(
                sql: "DELETE FROM presentRange WHERE domainID = ? AND identifier = ?", arguments: [domainID, identifier.rawValue])
        }
    }

    /// How many bytes of an item's file are present when it is partly present (not downloaded
    /// whole, with present ranges: of any content version, as
    /// ``partiallyPresent(domainID:)`` counts them), else `nil`. One indexed lookup.
    /// - Throws: `localIOFailure` when the database fails.
    public func presentBytes(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) -> Int64? {
        try read { db in try Self.presentBytes(domainID: domainID, identifier: identifier, in: db) }
    }

    /// ``partiallyPresent(domainID:)`` of some items only (a page of a subtree): memory and time
    /// bounded by `identifiers`, not by the domain. Items that are not partly present are not in
    /// the result. The identifiers of the domain's partly present files are read first, up to
    /// the page's size, in one pass over the ranges' primary key: none (the usual case) answers
    /// at once; fewer than the page are all of them, and only the page's among them are looked
    /// up; otherwise each item of the page is. So the cost follows the smaller of the page and
    /// what the domain has partly present (`ls` of a 10,000-item folder made 10,000 lookups
    /// before). Each item's bytes are summed alone, so a damaged range row of another item
    /// never fails the page.
    /// - Throws: `localIOFailure` when the database fails.
    public func partiallyPresent(domainID: Int64, among identifiers: some Sequence<ItemIdentifier>) throws(FileProviderError)
        -> [ItemIdentifier: Int64]
    {
        let page = Array(identifiers)
        guard !page.isEmpty else { return [:] }
        return try read { db in
            let partlyPresent = try String.fetchAll(
                db.cachedStatement(sql: "SELECT DISTINCT identifier FROM presentRange WHERE domainID = ? LIMIT ?"),
                arguments: [domainID, page.count]
            ).map { ItemIdentifier($0) }
            var lookups = page
            if partlyPresent.count < page.count {
                let wanted = Set(page)
                lookups = partlyPresent.filter { wanted.contains($0) }
            }
            var result: [ItemIdentifier: Int64] = [:]
            for identifier in lookups {
                if let bytes = try Self.presentBytes(domainID: domainID, identifier: identifier, in: db) { result[identifier] = bytes }
            }
            return result
        }
    }

    /// The files of a domain that are partly present and whose present ranges are all of an
    /// older content version than the item's (it changed in the store since they were
    /// fetched), with their records. Read from the ranges' table (its primary key), so it costs
    /// what the domain has partly present, and returns only what changed.
    /// - Throws: `localIOFailure` when the database fails.
    public func stalePartials(domainID: Int64) throws(FileProviderError) -> [ItemRecord] {
        try read { db in
            try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT \(ItemRecord.columnList) FROM item
                        WHERE domainID = ? AND identifier IN (SELECT DISTINCT identifier FROM presentRange WHERE domainID = ?)
                        AND kind = 'file' AND state = 'placeholder'
                        AND NOT EXISTS (SELECT 1 FROM presentRange r WHERE r.domainID = item.domainID
                            AND r.identifier = item.identifier AND r.contentVersion = item.contentVersion)
                        """),
                arguments: [domainID, domainID]
            ).map(ItemRecord.init(row:)).reduce(into: []) { $0.append($1) }
        }
    }

    static func presentBytes(domainID: Int64, identifier: ItemIdentifier, in db: Database) throws -> Int64? {
        let row = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT count(*), SUM(r."end" - r.start) FROM presentRange r
                    JOIN item i ON i.domainID = r.domainID AND i.identifier = r.identifier AND i.state = 'placeholder'
                    WHERE r.domainID = ? AND r.identifier = ?
                    """),
            arguments: [domainID, identifier.rawValue])
        guard let row, (row[0] as Int? ?? 0) > 0 else { return nil }
        return row[1] ?? 0
    }

    /// The items of a domain that are partly present (not downloaded whole) with present ranges,
    /// with how many bytes are present (of any content version: stale ranges still occupy disk
    /// until their file is rewritten). One entry per partly present file of the whole domain:
    /// for a report of the domain (tests, tools); the engine asks per item or per page
    /// (``presentBytes(domainID:identifier:)``, ``partiallyPresent(domainID:among:)``).
    /// - Throws: `localIOFailure` when the database fails.
    public func partiallyPresent(domainID: Int64) throws(FileProviderError) -> [ItemIdentifier: Int64] {
        try read { db in
            var result: [ItemIdentifier: Int64] = [:]
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT r.identifier, SUM(r."end" - r.start) FROM presentRange r
                    JOIN item i ON i.domainID = r.domainID AND i.identifier = r.identifier AND i.state = 'placeholder'
                    WHERE r.domainID = ? GROUP BY r.identifier
                    """,
                arguments: [domainID])
            while let row = try rows.next() { result[ItemIdentifier(row[0] as String)] = row[1] ?? 0 }
            return result
        }
    }

    static func presentRanges(domainID: Int64, identifier: ItemIdentifier, contentVersion: Data, in db: Database) throws
        -> [Range<Int64>]
    {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: "SELECT start, \"end\" FROM presentRange WHERE domainID = ? AND identifier = ? AND contentVersion = ? ORDER BY start"),
            arguments: [domainID, identifier.rawValue, contentVersion])
        return merged(
            rows.compactMap { row in
                let start: Int64 = row[0]
                let end: Int64 = row[1]
                return start >= 0 && start < end ? start..<end : nil
            })
    }

    /// Ranges sorted and merged where they overlap or touch.
    public static func merged(_ ranges: [Range<Int64>]) -> [Range<Int64>] {
        var result: [Range<Int64>] = []
        for range in ranges.filter({ !$0.isEmpty }).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = result.last, range.lowerBound <= last.upperBound {
                result[result.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                result.append(range)
            }
        }
        return result
    }
}
