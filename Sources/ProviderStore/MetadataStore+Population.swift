import Foundation
import GRDB
import ProviderCore

/// What populating a folder reads of it (``childrenToPopulate(domainID:parent:)``, and its
/// names only when a local file is in the way): not the rows of the files already downloaded.
extension MetadataStore {
    private static let selectChildrenToPopulate = """
        SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_parent WHERE domainID = ? AND parentIdentifier = ? AND path <> '' \
        AND (kind = 'folder' OR state <> 'materialized') ORDER BY filename
        """
    private static let selectChildPaths =
        "SELECT path FROM item INDEXED BY item_parent WHERE domainID = ? AND parentIdentifier = ? AND path <> ''"

    /// The items directly inside a folder that populating it looks at, by name: its folders and
    /// the items that are not materialized. The rows of materialized files are not read (a
    /// folder whose files were all just downloaded decodes none).
    /// - Throws: `localIOFailure` when the database fails.
    public func childrenToPopulate(domainID: Int64, parent: ItemIdentifier) throws(FileProviderError) -> [ItemRecord] {
        try read { db in
            try Row.fetchCursor(db.cachedStatement(sql: Self.selectChildrenToPopulate), arguments: [domainID, parent.rawValue])
                .map(ItemRecord.init(row:)).reduce(into: []) { $0.append($1) }
        }
    }

    /// The paths of the items directly inside a folder, in no particular order.
    /// - Throws: `localIOFailure` when the database fails.
    public func childPaths(domainID: Int64, parent: ItemIdentifier) throws(FileProviderError) -> Set<String> {
        try read { db in
            try String.fetchCursor(db.cachedStatement(sql: Self.selectChildPaths), arguments: [domainID, parent.rawValue])
                .reduce(into: Set<String>()) { $0.insert($1) }
        }
    }
}
