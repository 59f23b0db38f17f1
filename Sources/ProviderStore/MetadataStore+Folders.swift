import Foundation
import GRDB
import ProviderCore

/// Reads by path, one folder at a time: what lets the local scan stream through a domain of any
/// size (its memory bounded by the largest folder, not by the domain).
extension MetadataStore {
    private static let selectFrom = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_path WHERE domainID = ? AND path >= ? AND path < ? ORDER BY path
        """
    // The root's children have no upper bound on their paths.
    private static let selectFromRoot = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_path WHERE domainID = ? AND path >= ? AND path <> '' ORDER BY path
        """
    // After a path: strictly greater (its own row is not listed again).
    private static let selectAfter = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_path WHERE domainID = ? AND path > ? AND path < ? ORDER BY path
        """
    private static let selectAfterRoot = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_path WHERE domainID = ? AND path > ? AND path <> '' ORDER BY path
        """

    /// The items whose path is directly inside the folder at `path` ("" for the root's items),
    /// ordered by path. Found by path, not by parent identifier: a row whose parent identifier
    /// is stale still counts where its path puts it.
    ///
    /// Reads the `item_path` index in order and skips each subfolder's rows with one seek (its
    /// rows are the range from `sub/` to `sub0`), so it reads about one row more per subfolder
    /// than it returns, whatever lies below.
    /// - Throws: `localIOFailure` when the database fails.
    public func children(domainID: Int64, inFolderAt path: String) throws(FileProviderError) -> [ItemRecord] {
        try children(domainID: domainID, inFolderAt: path, after: nil, limit: .max)
    }

    /// At most `limit` of the items directly inside the folder at `path` ("" for the root's
    /// items), in path order, starting after the item at `after` (a path in that folder; from
    /// the first with `nil`): a folder of any size in pages, each read in its own transaction,
    /// skipping what lies below its subfolders as ``children(domainID:inFolderAt:)`` does.
    /// - Throws: `localIOFailure` when the database fails.
    public func children(domainID: Int64, inFolderAt path: String, after: String?, limit: Int) throws(FileProviderError)
        -> [ItemRecord]
    {
        let prefix = path.isEmpty ? "" : path + "/"
        let prefixLength = prefix.utf8.count
        let high = path.isEmpty ? nil : path + "0"
        let (from, strictly) = high == nil ? (Self.selectFromRoot, Self.selectAfterRoot) : (Self.selectFrom, Self.selectAfter)
        let wanted = max(1, limit)
        return try read { db in
            var found: [ItemRecord] = []
            // After `after`: strictly greater (its own row is not listed again).
            var (low, sql) = after.map { ($0, strictly) } ?? (prefix, from)
            while true {
                var arguments: StatementArguments = [domainID, low]
                if let high { arguments += [high] }
                let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
                var skipTo: String?
                while let row = try rows.next() {
                    let rowPath: String = row[4]
                    let rest = rowPath.utf8.dropFirst(prefixLength)
                    if let slash = rest.firstIndex(of: UInt8(ascii: "/")) {
                        skipTo = String(rowPath[..<slash]) + "0"
                        break
                    }
                    found.append(ItemRecord(row: row))
                    if found.count >= wanted { return found }
                }
                guard let next = skipTo else { return found }
                (low, sql) = (next, from)
            }
        }
    }

    /// Calls `body` with every item below the folder at `path` (not the folder itself), in path
    /// order, one row at a time: a subtree of any size, without holding it in memory. `body`
    /// runs inside one read transaction and must not use the database.
    /// - Throws: `localIOFailure` when the database fails.
    public func forEachDescendant(domainID: Int64, of path: String, _ body: (ItemRecord) -> Void) throws(FileProviderError) {
        let (low, high) = path.isEmpty ? ("", nil) : (path + "/", path + "0")
        try read { db in
            let rows: RowCursor
            if let high {
                rows = try Row.fetchCursor(db.cachedStatement(sql: Self.selectFrom), arguments: [domainID, low, high])
            } else {
                rows = try Row.fetchCursor(db.cachedStatement(sql: Self.selectFromRoot), arguments: [domainID, low])
            }
            while let row = try rows.next() { body(ItemRecord(row: row)) }
        }
    }

    /// At most `limit` items below the folder at `path` (not the folder itself), in path order,
    /// starting after the item at `after` (from the first with `nil`): a subtree of any size in
    /// pages, each read in its own transaction.
    /// - Throws: `localIOFailure` when the database fails.
    public func descendants(domainID: Int64, of path: String, after: String?, limit: Int) throws(FileProviderError)
        -> [ItemRecord]
    {
        // After `after` is "path > after" (not ">= after + NUL": a string bound as text ends at
        // its first NUL, so that read the item at `after` again, once per page).
        let (low, lowOperator) = after.map { ($0, ">") } ?? (path.isEmpty ? "" : path + "/", ">=")
        return try page(
            domainID: domainID, low: low, lowOperator: lowOperator, high: path.isEmpty ? nil : path + "0", descending: false, limit: limit)
    }

    /// At most `limit` items below the folder at `path` (not the folder itself), in reverse path
    /// order, starting before the item at `before` (from the last with `nil`): every item comes
    /// before the folder that holds it, so a subtree is taken apart deepest first, in pages,
    /// each read in its own transaction.
    /// - Throws: `localIOFailure` when the database fails.
    public func descendants(domainID: Int64, of path: String, before: String?, limit: Int) throws(FileProviderError)
        -> [ItemRecord]
    {
        let high = before ?? (path.isEmpty ? nil : path + "0")
        return try page(
            domainID: domainID, low: path.isEmpty ? "" : path + "/", lowOperator: ">=", high: high, descending: true, limit: limit)
    }

    /// At most `limit` rows (never the root) whose paths lie after `low` (by `lowOperator`) and
    /// before `high` (when there is one), by the `item_path` index, in path order or its reverse.
    private func page(domainID: Int64, low: String, lowOperator: String, high: String?, descending: Bool, limit: Int)
        throws(FileProviderError) -> [ItemRecord]
    {
        var sql =
            "SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_path WHERE domainID = ? AND path \(lowOperator) ? AND path <> ''"
        var arguments: StatementArguments = [domainID, low]
        if let high {
            sql += " AND path < ?"
            arguments += [high]
        }
        sql += descending ? " ORDER BY path DESC LIMIT ?" : " ORDER BY path LIMIT ?"
        arguments += [max(1, limit)]
        return try read { db in
            let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
            var found: [ItemRecord] = []
            while let row = try rows.next() { found.append(ItemRecord(row: row)) }
            return found
        }
    }

    /// How many dataless folders lie below the folder at `path` (not the folder itself).
    /// - Throws: `localIOFailure` when the database fails.
    public func datalessFolderCount(domainID: Int64, below path: String) throws(FileProviderError) -> Int {
        let (low, high) = path.isEmpty ? ("", nil) : (path + "/", path + "0")
        let range = high == nil ? "path >= ? AND path <> ''" : "path >= ? AND path < ?"
        let sql = """
            SELECT count(*) FROM item INDEXED BY item_path WHERE domainID = ? AND \(range) AND kind = 'folder' AND isDataless
            """
        return try read { db in
            let arguments: StatementArguments = high.map { [domainID, low, $0] } ?? [domainID, low]
            return try Int.fetchOne(db.cachedStatement(sql: sql), arguments: arguments) ?? 0
        }
    }

    /// How many files below the folder at `path` are not downloaded with the store's current
    /// contents (placeholders, outdated or partial copies), and their sizes in the store
    /// added up (negative sizes as 0, the sum saturating).
    /// - Throws: `localIOFailure` when the database fails.
    public func filesToDownload(domainID: Int64, below path: String) throws(FileProviderError) -> (count: Int, bytes: Int64) {
        let (low, high) = path.isEmpty ? ("", nil) : (path + "/", path + "0")
        let range = high == nil ? "path >= ? AND path <> ''" : "path >= ? AND path < ?"
        let sql = """
            SELECT size FROM item INDEXED BY item_path WHERE domainID = ? AND \(range) AND kind = 'file' \
            AND NOT (state = 'materialized' AND localContentVersion IS contentVersion)
            """
        return try read { db in
            let arguments: StatementArguments = high.map { [domainID, low, $0] } ?? [domainID, low]
            let sizes = try Int64.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
            var count = 0
            var bytes: Int64 = 0
            while let size = try sizes.next() {
                count += 1
                let (sum, overflow) = bytes.addingReportingOverflow(max(0, size))
                bytes = overflow ? .max : sum
            }
            return (count, bytes)
        }
    }

    /// Calls `body` with the path of every folder of a domain (the root is ""), one row at a
    /// time, without holding them. `body` runs inside one read transaction and must not use the
    /// database.
    /// - Throws: `localIOFailure` when the database fails.
    public func forEachFolderPath(domainID: Int64, _ body: (String) -> Void) throws(FileProviderError) {
        try read { db in
            let statement = try db.cachedStatement(sql: "SELECT path FROM item WHERE domainID = ? AND kind = 'folder'")
            let rows = try String.fetchCursor(statement, arguments: [domainID])
            while let path = try rows.next() { body(path) }
        }
    }
}
