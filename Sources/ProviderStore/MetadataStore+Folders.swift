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

    /// The items whose path is directly inside the folder at `path` ("" for the root's items),
    /// ordered by path. Found by path, not by parent identifier: a row whose parent identifier
    /// is stale still counts where its path puts it.
    ///
    /// Reads the `item_path` index in order and skips each subfolder's rows with one seek (its
    /// rows are the range from `sub/` to `sub0`), so it reads about one row more per subfolder
    /// than it returns, whatever lies below.
    /// - Throws: `localIOFailure` when the database fails.
    public func children(domainID: Int64, inFolderAt path: String) throws(FileProviderError) -> [ItemRecord] {
        let prefix = path.isEmpty ? "" : path + "/"
        let prefixLength = prefix.utf8.count
        return try read { db in
            var found: [ItemRecord] = []
            var low = prefix
            while true {
                let statement =
                    path.isEmpty
                    ? try db.cachedStatement(sql: Self.selectFromRoot) : try db.cachedStatement(sql: Self.selectFrom)
                let arguments: StatementArguments = path.isEmpty ? [domainID, low] : [domainID, low, path + "0"]
                let rows = try Row.fetchCursor(statement, arguments: arguments)
                var skipTo: String?
                while let row = try rows.next() {
                    let rowPath: String = row[4]
                    let rest = rowPath.utf8.dropFirst(prefixLength)
                    if let slash = rest.firstIndex(of: UInt8(ascii: "/")) {
                        // A row below a subfolder: "/" is 0x2F, so "sub0" follows all of "sub/…".
                        skipTo = String(rowPath[..<slash]) + "0"
                        break
                    }
                    found.append(ItemRecord(row: row))
                }
                guard let next = skipTo else { return found }
                low = next
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
