import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// The files of every domain of `size` bytes, in domain and path order: the candidates for
    /// the same contents as a file of that size (`whereis`).
    ///
    /// No index serves it (one on size measured 24 bytes per item, for a command run by
    /// hand): every row of the table is read once.
    /// - Throws: `localIOFailure` when the database fails.
    public func files(ofSize size: Int64) throws(FileProviderError) -> [ContentCopy] {
        let sql = "SELECT domainID, path, size, \(Self.comparableHash) FROM item WHERE kind = 'file' AND size = ? ORDER BY domainID, path"
        return try read { db in
            let rows = try Row.fetchCursor(db.makeStatement(sql: sql), arguments: [size])
            var found: [ContentCopy] = []
            while let row = try rows.next() { found.append(Self.copy(row)) }
            return found
        }
    }

    /// The files of every domain whose size at least one other file has, for at most `limit`
    /// sizes larger than `after` (from the smallest non-empty size with `nil`), in size, domain
    /// and path order: the candidates for the same contents (`dupes`), a page of sizes at a
    /// time. Empty files are left out (all of them are the same). Each page reads the table once
    /// (grouping by size in a temporary b-tree) and holds its files in memory.
    /// - Throws: `localIOFailure` when the database fails.
    public func filesSharingASize(after: Int64?, limit: Int) throws(FileProviderError) -> [ContentCopy] {
        let sql = """
            SELECT domainID, path, size, \(Self.comparableHash) FROM item WHERE kind = 'file' AND size IN (
                SELECT size FROM item WHERE kind = 'file' AND size > ? GROUP BY size HAVING count(*) > 1 ORDER BY size LIMIT ?)
            ORDER BY size, domainID, path
            """
        return try read { db in
            let rows = try Row.fetchCursor(db.makeStatement(sql: sql), arguments: [max(0, after ?? 0), max(1, limit)])
            var found: [ContentCopy] = []
            while let row = try rows.next() { found.append(Self.copy(row)) }
            return found
        }
    }

    /// ``ItemRecord/comparableHash`` in SQL: the engine's SHA-256 of the current contents where
    /// it has one, else the store's hash.
    static let comparableHash = """
        CASE WHEN contentSHA256 IS NOT NULL AND hashedContentVersion = contentVersion THEN 'sha256:' || contentSHA256 \
        ELSE contentHash END
        """

    private static func copy(_ row: Row) -> ContentCopy {
        ContentCopy(domainID: row[0], path: row[1], size: row[2], contentHash: row[3])
    }
}
