import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// How many downloaded files a domain has (at `below` and under it, the whole domain for
    /// ""), and their bytes: what `verify` reads, for its progress.
    ///
    /// The whole domain by the `item_materialized` index; a subtree by the `item_path` index.
    /// - Throws: `localIOFailure` when the database fails.
    public func downloadedFileTotals(domainID: Int64, below: String) throws(FileProviderError) -> (files: Int, bytes: Int64) {
        var sql = "SELECT count(*), coalesce(sum(size), 0) FROM item"
        var arguments: StatementArguments = [domainID]
        if below.isEmpty {
            sql += " INDEXED BY item_materialized WHERE domainID = ? AND state = 'materialized' AND kind = 'file'"
        } else {
            sql +=
                " INDEXED BY item_path WHERE domainID = ? AND path >= ? AND path < ? AND (path = ? OR path >= ?) AND state = 'materialized' AND kind = 'file'"
            arguments += [below, below + "0", below, below + "/"]
        }
        return try read { db in
            let row = try Row.fetchOne(db, sql: sql, arguments: arguments)
            return (row?[0] ?? 0, row?[1] ?? 0)
        }
    }
}
