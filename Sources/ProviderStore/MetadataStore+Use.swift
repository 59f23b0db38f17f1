import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// Records that programs used these items' files at `date` (an on-access event, a local
    /// open), for least-recently-used eviction.
    /// - Throws: `localIOFailure` when the database fails.
    public func recordUse(domainID: Int64, identifiers: [ItemIdentifier], at date: Date = Date()) throws(FileProviderError) {
        if identifiers.isEmpty { return }
        try write { db in
            let upsert = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO itemUse (domainID, identifier, lastUsedAt) VALUES (?, ?, ?)")
            for identifier in identifiers {
                try upsert.execute(arguments: [domainID, identifier.rawValue, date.timeIntervalSince1970])
            }
        }
    }

    /// When programs last used an item's file, or `nil` when no use was recorded.
    /// - Throws: `localIOFailure` when the database fails.
    public func lastUse(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) -> Date? {
        try read { db in
            try Double.fetchOne(
                db.cachedStatement(sql: "SELECT lastUsedAt FROM itemUse WHERE domainID = ? AND identifier = ?"),
                arguments: [domainID, identifier.rawValue]
            ).map(Date.init(timeIntervalSince1970:))
        }
    }

    /// A setting of the whole home, or `nil` when it is not set.
    /// - Throws: `localIOFailure` when the database fails.
    public func setting(_ key: String) throws(FileProviderError) -> String? {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = ?", arguments: [key]) }
    }

    /// Sets (or with `nil` removes) a setting of the whole home.
    /// - Throws: `localIOFailure` when the database fails.
    public func setSetting(_ key: String, _ value: String?) throws(FileProviderError) {
        try write { db in
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO setting (key, value) VALUES (?, ?)", arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM setting WHERE key = ?", arguments: [key])
            }
        }
    }
}

extension MetadataStore {
    /// The content policies set explicitly in a domain, by item path (few rows: read through
    /// the partial index `item_policy`).
    /// - Throws: `localIOFailure` when the database fails.
    public func explicitPolicies(domainID: Int64) throws(FileProviderError) -> [String: ContentPolicy] {
        try read { db in
            var result: [String: ContentPolicy] = [:]
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: "SELECT path, contentPolicy FROM item INDEXED BY item_policy WHERE domainID = ? AND contentPolicy IS NOT NULL"),
                arguments: [domainID])
            while let row = try rows.next() {
                result[row[0]] = ContentPolicy(rawValue: row[1] as String) ?? .eager
            }
            return result
        }
    }
}
