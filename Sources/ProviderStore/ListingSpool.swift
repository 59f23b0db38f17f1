import Foundation
import GRDB
import ProviderCore

/// The pages of a store's flat listing (``ProviderCore/FlatListing``), spooled into a database
/// file of their own so that sync down can read each folder's listing without holding the
/// store in memory. Items are kept in the order they came, a folder that comes on several pages
/// once (its first description). Refused items are kept apart. The file is removed by
/// ``remove()``; a file left by a crash is removed by ``removeLeftovers(in:)``. Blocking: call
/// on the engine's threads.
public final class ListingSpool: @unchecked Sendable {
    /// The spool files' name prefix in the staging folder.
    public static let prefix = "listing-spool-"

    public let url: URL
    private let queue: DatabaseQueue
    private let arena = BindArena()
    /// Items and refusals spooled so far.
    public private(set) var itemCount = 0
    public private(set) var refused: [RefusedItem] = []

    /// Opens a new spool file in `folder`.
    /// - Throws: `localIOFailure` when the file cannot be made.
    public init(in folder: URL) throws(FileProviderError) {
        url = folder.appendingPathComponent(Self.prefix + UUID().uuidString + ".sqlite")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                // Nothing survives a crash on purpose: the next sync lists again.
                try db.execute(sql: "PRAGMA journal_mode = OFF")
                try db.execute(sql: "PRAGMA synchronous = OFF")
                try db.execute(sql: "PRAGMA cache_size = -8192")
            }
            queue = try DatabaseQueue(path: url.path, configuration: configuration)
            try queue.write { db in
                // The columns of the metadata database's item rows (ItemRecord+Row), untyped:
                // the rows are written and read with the same code.
                let columns = ItemRecord.columnList.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                try db.execute(
                    sql: """
                        CREATE TABLE item (seq INTEGER PRIMARY KEY, \(columns.joined(separator: ", ")), UNIQUE(identifier));
                        CREATE INDEX itemByParent ON item(parentIdentifier, seq);
                        """)
            }
        } catch {
            throw FileProviderError(.localIOFailure, "cannot make a listing spool in \(folder.path): \(error)")
        }
    }

    /// Adds one page of the flat listing, in one transaction.
    /// - Throws: `localIOFailure` when the file cannot be written.
    public func add(_ page: ItemPage) throws(FileProviderError) {
        do {
            let records = page.items.map { ItemRecord(domainID: 0, item: $0, path: "") }
            let arena = self.arena
            itemCount += try queue.write { db in
                let insert = try db.cachedStatement(
                    sql: "INSERT OR IGNORE INTO item (\(ItemRecord.freshColumnList)) VALUES (\(ItemRecord.freshPlaceholders))")
                var added = 0
                for index in records.indices {
                    try MetadataStore.execute(insert, records[index...index], arena: arena, fresh: true, in: db)
                    added += db.changesCount
                }
                return added
            }
        } catch {
            throw FileProviderError(.localIOFailure, "cannot write the listing spool \(url.path): \(error)")
        }
        refused += page.refused
    }

    /// The items whose folder is one of `parents`, in the order they came.
    /// - Throws: `localIOFailure` when the file cannot be read; `corruptData` (ItemBounds) for a
    ///   folder with more entries than one folder may have.
    public func listing(of parents: [ItemIdentifier]) throws(FileProviderError) -> [Item] {
        do {
            return try queue.read { db in
                var items: [Item] = []
                let marks = parents.map { _ in "?" }.joined(separator: ", ")
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT \(ItemRecord.columnList) FROM item WHERE parentIdentifier IN (\(marks)) ORDER BY seq",
                    arguments: StatementArguments(parents.map(\.rawValue)))
                while let row = try rows.next() {
                    items.append(ItemRecord(row: row).item)
                    if items.count > ItemBounds.maximumEntriesPerFolder {
                        throw ItemBounds.tooManyEntries(in: parents.first?.rawValue ?? "")
                    }
                }
                return items
            }
        } catch let error as FileProviderError {
            throw error
        } catch {
            throw FileProviderError(.localIOFailure, "cannot read the listing spool \(url.path): \(error)")
        }
    }

    /// Closes and deletes the spool file.
    public func remove() {
        try? queue.close()
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
    }

    /// Deletes spool files a process that died left in `folder`.
    public static func removeLeftovers(in folder: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return }
        for name in names where name.hasPrefix(prefix) { try? FileManager.default.removeItem(at: folder.appendingPathComponent(name)) }
    }
}
