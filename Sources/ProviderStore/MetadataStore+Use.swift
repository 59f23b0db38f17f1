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
    /// The content policies set explicitly on the folders of a domain (the root too), by path:
    /// what inheritance needs (``ItemRecord/contentPolicy`` is a file's own). Read through the
    /// partial index `item_folder_policy`; the files' own policies (a user may pin a million
    /// files one by one) are neither read, returned nor held.
    /// - Throws: `localIOFailure` when the database fails.
    public func explicitFolderPolicies(domainID: Int64) throws(FileProviderError) -> [String: ContentPolicy] {
        try read { db in
            var result: [String: ContentPolicy] = [:]
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT path, contentPolicy FROM item INDEXED BY item_folder_policy
                        WHERE domainID = ? AND contentPolicy IS NOT NULL AND (kind = 'folder' OR path = '')
                        """),
                arguments: [domainID])
            while let row = try rows.next() {
                result[row[0]] = ContentPolicy(rawValue: row[1] as String) ?? .eager
            }
            return result
        }
    }

    /// The content policies set explicitly on the folders that hold `path` (the root, each
    /// folder above it, and `path` itself when it is a folder), by path: what inheritance needs
    /// to answer for that one path, at most one row per path component (read through the
    /// unique index `item_path`).
    /// - Throws: `localIOFailure` when the database fails.
    public func explicitFolderPolicies(domainID: Int64, along path: String) throws(FileProviderError) -> [String: ContentPolicy] {
        // "", "a", "a/b", "a/b/c" for "a/b/c".
        var paths = [""]
        if !path.isEmpty {
            var rest = path[...]
            while let slash = rest.firstIndex(of: "/") {
                paths.append(String(path[..<slash]))
                rest = path[path.index(after: slash)...]
            }
            paths.append(path)
        }
        var arguments: StatementArguments = [domainID]
        for ancestor in paths { arguments += [ancestor] }
        let marks = Array(repeating: "?", count: paths.count).joined(separator: ", ")
        return try read { db in
            var result: [String: ContentPolicy] = [:]
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT path, contentPolicy FROM item INDEXED BY item_path
                    WHERE domainID = ? AND path IN (\(marks)) AND contentPolicy IS NOT NULL AND (kind = 'folder' OR path = '')
                    """,
                arguments: arguments)
            while let row = try rows.next() {
                result[row[0]] = ContentPolicy(rawValue: row[1] as String) ?? .eager
            }
            return result
        }
    }

    /// Whether an item of a domain (a folder or a file) has `policy` set on itself; read
    /// through the partial index `item_policy`, nothing held.
    /// - Throws: `localIOFailure` when the database fails.
    public func hasExplicitPolicy(_ policy: ContentPolicy, domainID: Int64) throws(FileProviderError) -> Bool {
        try read { db in
            try Bool.fetchOne(
                db.cachedStatement(
                    sql: "SELECT EXISTS (SELECT 1 FROM item INDEXED BY item_policy WHERE domainID = ? AND contentPolicy = ?)"),
                arguments: [domainID, policy.rawValue]) ?? false
        }
    }

    /// Every content policy set explicitly in a domain, by item path, files' own included: one
    /// entry per pinned file, so it grows with what a user pins. For tests and inspection; the
    /// engine resolves policies from ``explicitFolderPolicies(domainID:)`` and each item's own
    /// ``ItemRecord/contentPolicy``.
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
