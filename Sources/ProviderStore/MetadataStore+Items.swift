import CSQLiteConfig
import Foundation
import GRDB
import GRDBSQLite
import ProviderCore

extension MetadataStore {
    private static let selectByIdentifier = "SELECT \(ItemRecord.columnList) FROM item WHERE domainID = ? AND identifier = ?"
    /// Completed by ``materializedItems(domainID:identifiers:)`` with the identifiers asked for.
    private static let selectMaterialized = """
        SELECT \(ItemRecord.columnList) FROM item WHERE domainID = ? AND state = 'materialized' \
        AND localContentVersion IS contentVersion
        """
    private static let selectByPath = "SELECT \(ItemRecord.columnList) FROM item WHERE domainID = ? AND path = ?"
    // Without statistics SQLite's planner prefers the primary key's `domainID` prefix to
    // `item_parent` (a scan of the whole domain per folder): name the index.
    private static let selectChildren =
        "SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_parent WHERE domainID = ? AND parentIdentifier = ? AND path <> '' ORDER BY filename"
    private static let selectAll = "SELECT \(ItemRecord.columnList) FROM item WHERE domainID = ?"
    private static let selectDescendants = """
        SELECT \(ItemRecord.columnList) FROM item WHERE domainID = ? AND path >= ? AND path < ? ORDER BY path
        """
    private static let upsert = "INSERT OR REPLACE INTO item (\(ItemRecord.columnList)) VALUES (\(ItemRecord.placeholders))"
    private static let deleteOne = "DELETE FROM item WHERE domainID = ? AND identifier = ?"

    /// The item with that identifier, or `nil`.
    public func item(domainID: Int64, identifier: ItemIdentifier) throws(FileProviderError) -> ItemRecord? {
        try read { db in
            try Row.fetchOne(db.cachedStatement(sql: Self.selectByIdentifier), arguments: [domainID, identifier.rawValue])
                .map(ItemRecord.init(row:))
        }
    }

    /// The most identifiers ``materializedItems(domainID:identifiers:)`` asks for in one
    /// statement (a download batch's files fit in one).
    static let materializedChunk = 64

    /// The items among these that are materialized with the store's current content (not
    /// outdated), by identifier, read in one transaction; only those rows are decoded. Up to
    /// ``materializedChunk`` identifiers go to SQLite in one statement (`identifier IN (…)`),
    /// not one look-up each.
    public func materializedItems(domainID: Int64, identifiers: [ItemIdentifier]) throws(FileProviderError)
        -> [ItemIdentifier: ItemRecord]
    {
        if identifiers.isEmpty { return [:] }
        return try read { db in
            var found: [ItemIdentifier: ItemRecord] = [:]
            var start = identifiers.startIndex
            while start < identifiers.endIndex {
                let end = min(start + Self.materializedChunk, identifiers.endIndex)
                let chunk = identifiers[start..<end]
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let statement = try db.cachedStatement(sql: Self.selectMaterialized + " AND identifier IN (\(marks))")
                var values: [(any DatabaseValueConvertible)?] = [domainID]
                values.reserveCapacity(chunk.count + 1)
                for identifier in chunk { values.append(identifier.rawValue) }
                let rows = try Row.fetchCursor(statement, arguments: StatementArguments(values))
                while let row = try rows.next() {
                    let record = ItemRecord(row: row)
                    found[record.identifier] = record
                }
                start = end
            }
            return found
        }
    }

    /// The item at a path relative to the replica root ("" is the root), or `nil`.
    public func item(domainID: Int64, path: String) throws(FileProviderError) -> ItemRecord? {
        try read { db in
            try Row.fetchOne(db.cachedStatement(sql: Self.selectByPath), arguments: [domainID, path])
                .map(ItemRecord.init(row:))
        }
    }

    /// The items directly inside a folder, by name.
    public func children(domainID: Int64, parent: ItemIdentifier) throws(FileProviderError) -> [ItemRecord] {
        try read { db in try Self.children(domainID: domainID, parent: parent, in: db) }
    }

    /// ``children(domainID:parent:)`` inside a transaction that is already open.
    static func children(domainID: Int64, parent: ItemIdentifier, in db: Database) throws -> [ItemRecord] {
        try Row.fetchCursor(db.cachedStatement(sql: Self.selectChildren), arguments: [domainID, parent.rawValue])
            .map(ItemRecord.init(row:)).reduce(into: []) { $0.append($1) }
    }

    /// Every item below a folder path (not the folder itself), ordered by path; every item of
    /// the domain when `path` is "".
    public func descendants(domainID: Int64, of path: String) throws(FileProviderError) -> [ItemRecord] {
        if path.isEmpty {
            return try read { db in
                try Row.fetchCursor(db.cachedStatement(sql: Self.selectAll + " AND path <> '' ORDER BY path"), arguments: [domainID])
                    .map(ItemRecord.init(row:)).reduce(into: []) { $0.append($1) }
            }
        }
        // Every path that starts with "path/": "/" is 0x2F, the next byte is "0".
        let low = path + "/"
        let high = path + "0"
        return try read { db in
            try Row.fetchCursor(db.cachedStatement(sql: Self.selectDescendants), arguments: [domainID, low, high])
                .map(ItemRecord.init(row:)).reduce(into: []) { $0.append($1) }
        }
    }

    /// Every item of a domain, the root included, in no particular order.
    public func allItems(domainID: Int64) throws(FileProviderError) -> [ItemRecord] {
        try read { db in
            try Row.fetchCursor(db.cachedStatement(sql: Self.selectAll), arguments: [domainID])
                .map(ItemRecord.init(row:)).reduce(into: []) { $0.append($1) }
        }
    }

    /// Writes items and removes others, all in one transaction: deletions first, then upserts,
    /// then the digests of folders whose listings those rows now match (``FolderListing``).
    public func apply(
        domainID: Int64, upserts: [ItemRecord], deletions: [ItemIdentifier], listings: [FolderListing] = []
    ) throws(FileProviderError) {
        if upserts.isEmpty && deletions.isEmpty && listings.isEmpty { return }
        try write { db in
            try Self.apply(domainID: domainID, upserts: upserts, deletions: deletions, in: db)
            try Self.keep(listings, domainID: domainID, in: db)
        }
    }

    /// Writes the rows of finished downloads, in one transaction, as
    /// ``apply(domainID:upserts:deletions:listings:)`` writes them, but a row still at the same
    /// identifier, parent, name, path and kind (a download's usual case) is changed in place by
    /// one `UPDATE`: not deleted and inserted again, with every index entry and trigger that
    /// costs. The updates run with the connection's triggers off: the counters take the
    /// difference the rows made (``ItemCounts``: what they counted for, read before, and what
    /// they were written with), and the digests of the rows' folders are dropped once per
    /// folder, as the triggers would row by row (with them, the triggers' programs were half of
    /// this write). Any other row (moved or gone meanwhile) is written as `apply` writes it.
    /// - Throws: `localIOFailure` when the database fails.
    public func recordDownloads(domainID: Int64, records: [ItemRecord]) throws(FileProviderError) {
        if records.isEmpty { return }
        try write { db in
            let identifiers = records.map(\.identifier)
            let before = try ItemCounts(rowsOf: identifiers, domainID: domainID, in: db)
            let arena = BindArena()
            var rest: [ItemRecord] = []
            var updated: [ItemRecord] = []
            try ItemCounts.withoutTriggers(db) {
                let update = try db.cachedStatement(sql: Self.updateInPlace)
                for index in records.indices {
                    try Self.execute(update, records[index...index], arena: arena, in: db)
                    if db.changesCount == 0 { rest.append(records[index]) } else { updated.append(records[index]) }
                }
            }
            // The updated rows count now for what they were written with (not read again); the
            // others are as they were, so what they counted for before is taken out.
            var earlier = before
            if !rest.isEmpty { earlier = before.subtracting(try ItemCounts(rowsOf: rest.map(\.identifier), domainID: domainID, in: db)) }
            try ItemCounts(updated).subtracting(earlier).add(domainID: domainID, in: db)
            try Self.dropListings(holding: updated, domainID: domainID, in: db)
            try Self.dropOwnListings(of: updated.filter { $0.kind == .folder }, domainID: domainID, in: db)
            try Self.apply(domainID: domainID, upserts: rest, deletions: [], in: db)
            try Self.dropEarlierPlacedDownloads(domainID: domainID, updated.lazy.map { ($0.identifier, $0.localInode) }, in: db)
        }
    }

    /// The columns that say which row an item is and where it is: ``recordDownloads(domainID:records:)``
    /// updates a row in place only when they are unchanged.
    private static let placeColumns: Set<String> = ["domainID", "identifier", "parentIdentifier", "filename", "path", "kind"]

    /// `UPDATE item SET <every other column> WHERE <placeColumns unchanged>`, with the
    /// parameters numbered as ``ItemRecord/bind(to:firstIndex:arena:)`` binds them.
    private static let updateInPlace: String = {
        let columns = ItemRecord.columnList.split(separator: ",").enumerated().map { index, name in
            (name: name.trimmingCharacters(in: .whitespacesAndNewlines), number: index + 1)
        }
        let set = columns.filter { !placeColumns.contains($0.name) }.map { "\($0.name) = ?\($0.number)" }
        let same = columns.filter { placeColumns.contains($0.name) }.map { "\($0.name) = ?\($0.number)" }
        return "UPDATE item SET \(set.joined(separator: ", ")) WHERE \(same.joined(separator: " AND "))"
    }()

    /// ``apply(domainID:upserts:deletions:)`` inside a transaction that is already open.
    static func apply(domainID: Int64, upserts: [ItemRecord], deletions: [ItemIdentifier], in db: Database) throws {
        if !deletions.isEmpty {
            let delete = try db.cachedStatement(sql: Self.deleteOne)
            let ranges = try db.cachedStatement(sql: "DELETE FROM presentRange WHERE domainID = ? AND identifier = ?")
            let notes = try db.cachedStatement(sql: "DELETE FROM placedDownload WHERE domainID = ? AND identifier = ?")
            for identifier in deletions {
                try delete.execute(arguments: [domainID, identifier.rawValue])
                try ranges.execute(arguments: [domainID, identifier.rawValue])
                try notes.execute(arguments: [domainID, identifier.rawValue])
            }
        }
        try write(upserts, insert: false, in: db)
        try dropEarlierPlacedDownloads(
            domainID: domainID, upserts.lazy.filter { $0.state == .materialized }.map { ($0.identifier, $0.localInode) }, in: db)
    }

    /// Writes rows: replacing rows of the same identifier or path, or (`insert`) failing with
    /// `SQLITE_CONSTRAINT` when there is one.
    private static func write(_ upserts: [ItemRecord], insert: Bool, in db: Database) throws {
        // Many rows per statement: one step for 32 rows costs a third of 32 steps. Inserted rows
        // that have nothing in the columns a new row leaves NULL (a first sync's, nearly all) bind
        // only the others.
        let fresh = insert && upserts.allSatisfy(\.isFresh)
        var start = upserts.startIndex
        let arena = BindArena()
        if upserts.count >= Self.rowsPerUpsert {
            let many = try db.cachedStatement(sql: fresh ? Self.insertFreshMany : insert ? Self.insertMany : Self.upsertMany)
            while upserts.endIndex - start >= Self.rowsPerUpsert {
                try Self.execute(many, upserts[start..<(start + Self.rowsPerUpsert)], arena: arena, fresh: fresh, in: db)
                start += Self.rowsPerUpsert
            }
        }
        if start < upserts.endIndex {
            let one = try db.cachedStatement(sql: fresh ? Self.insertFreshOne : insert ? Self.insertOne : Self.upsert)
            for index in start..<upserts.endIndex {
                try Self.execute(one, upserts[index...index], arena: arena, fresh: fresh, in: db)
            }
        }
    }

    /// Inserts items the database does not hold yet (a domain's first sync), in one
    /// transaction, and adds them to the domain's counters once for the batch rather than row by
    /// row. When one of them is there after all (its identifier or its path), the batch is
    /// written as ``apply(domainID:upserts:deletions:listings:)`` writes it. `listings`: digests
    /// of folders whose listings the rows now match, kept after the rows.
    /// - Throws: `localIOFailure` when the database fails.
    public func insertNew(domainID: Int64, records: [ItemRecord], listings: [FolderListing] = []) throws(FileProviderError) {
        if records.isEmpty && listings.isEmpty { return }
        try write { db in
            do {
                try db.inSavepoint {
                    // The rows go in with this connection's triggers off: no trigger program
                    // runs per row (they counted rows and dropped folder digests, which the
                    // batch does once below; 0.6 CPU-seconds of a million-item first sync).
                    // And without a foreign key check per row (a seek in `domain` for each,
                    // 8% of SQLite's insert cost): the batch is one domain's, checked once here,
                    // in the transaction that writes it, so no removal of it can come between.
                    try Self.requireDomain(domainID, in: db)
                    try ItemCounts.withoutTriggers(db) {
                        try Self.withoutForeignKeyChecks(db) { try Self.write(records, insert: true, in: db) }
                    }
                    try ItemCounts(records).add(domainID: domainID, in: db)
                    try Self.dropListings(holding: records, domainID: domainID, in: db)
                    return .commit
                }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                try Self.apply(domainID: domainID, upserts: records, deletions: [], in: db)
            }
            try Self.keep(listings, domainID: domainID, in: db)
        }
    }

    /// Throws what a row of a domain that is not there throws with foreign keys checked
    /// (`SQLITE_CONSTRAINT_FOREIGNKEY`) when `domainID` names no domain.
    private static func requireDomain(_ domainID: Int64, in db: Database) throws {
        let exists = try db.cachedStatement(sql: "SELECT 1 FROM domain WHERE id = ?")
        if try Int.fetchOne(exists, arguments: [domainID]) == nil {
            throw DatabaseError(resultCode: .SQLITE_CONSTRAINT_FOREIGNKEY, message: "FOREIGN KEY constraint failed")
        }
    }

    /// Runs `body` with the foreign key checks of `db`'s connection off, and turns them on
    /// again however it ends; statements are prepared again at each change, as with
    /// ``ItemCounts/withoutTriggers(_:_:)``. Only for rows whose references were checked.
    /// - Throws: what `body` throws; `DatabaseError` when SQLite refuses the setting.
    private static func withoutForeignKeyChecks<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        let connection = db.sqliteConnection
        let off = fp_sqlite_enable_foreign_keys(connection, 0)
        guard off == SQLITE_OK else {
            throw DatabaseError(resultCode: ResultCode(rawValue: off), message: "cannot turn foreign key checks off")
        }
        defer { _ = fp_sqlite_enable_foreign_keys(connection, 1) }
        return try body()
    }

    /// Writes one item and marks the journal entry of the operation that made it done, in one
    /// transaction: after a crash, either both happened or neither did.
    public func save(_ record: ItemRecord, finishing entry: JournalEntry) throws(FileProviderError) {
        try save([record], finishing: [entry])
    }

    /// Writes items and marks the journal entries of the operations that made them done, all in
    /// one transaction: after a crash, either all of it happened or none did.
    public func save(_ records: [ItemRecord], finishing entries: [JournalEntry]) throws(FileProviderError) {
        _ = try save(records, finishing: entries, checkingNew: [], refusal: { _, _ in "" })
    }

    /// Writes new items and marks the journal entries of the operations that made them done,
    /// as ``save(_:finishing:)`` does, in one transaction, unless another item of the domain
    /// (at another path) holds a new item's identifier: that item is not written (it would take
    /// the other's place) and its entry stays open, `pending` with `refusal(new, holder)` as its
    /// last error, so the next attempt is a replay. `new[i]` says whether `records[i]` is a new
    /// item to check; the others are written as they are. Returns the items not written, each
    /// with the item that holds its identifier.
    /// - Throws: `localIOFailure` when the database fails; nothing is written then.
    public func save(
        _ records: [ItemRecord], finishing entries: [JournalEntry], checkingNew new: [Bool],
        refusal: (ItemRecord, ItemRecord) -> String
    ) throws(FileProviderError) -> [(record: ItemRecord, holder: ItemRecord)] {
        guard let domainID = records.first?.domainID ?? entries.first?.domainID else { return [] }
        let now = Date()
        return try write { db in
            var holderPath = ParameterBinder(
                try db.cachedStatement(sql: "SELECT path FROM item WHERE domainID = ? AND identifier = ?"), reserving: 0)
            let fetch = try db.cachedStatement(sql: Self.selectByIdentifier)
            // Records past the entries are written without one (as `save(_:finishing:)` did).
            var (saved, finished) = ([ItemRecord](), [JournalEntry]())
            var refused: [(record: ItemRecord, holder: ItemRecord)] = []
            for (index, record) in records.enumerated() {
                // A new item's identifier is nearly always free: its holder's path is asked first
                // without a row made (``ParameterBinder``), its row only when the path differs.
                if index < new.count, new[index], index < entries.count,
                    let path = try holderPath.first(
                        in: db, binding: domainID, record.identifier.rawValue, { ParameterBinder.text($0, 0) }),
                    path != record.path,
                    let row = try Row.fetchOne(fetch, arguments: [domainID, record.identifier.rawValue])
                {
                    let holder = ItemRecord(row: row)
                    var open = entries[index]
                    open.state = .pending
                    open.lastError = refusal(record, holder)
                    open.updatedAt = now
                    try Self.update(open, in: db)
                    refused.append((record, holder))
                    continue
                }
                saved.append(record)
                if index < entries.count { finished.append(entries[index]) }
            }
            try Self.apply(domainID: domainID, upserts: saved, deletions: [], in: db)
            // The files the store took (created or changed): unconfirmed until it lists them.
            let uploads = zip(saved, finished).filter { $0.1.operation == "create" || $0.1.operation == "modify" }.map(\.0)
            try Self.noteUnconfirmed(uploads, now: now, in: db)
            for var entry in finished {
                entry.state = .done
                entry.lastError = nil
                entry.updatedAt = now
                try Self.update(entry, in: db)
            }
            return refused
        }
    }

    private static let rowsPerUpsert = 32
    private static let upsertMany =
        "INSERT OR REPLACE INTO item (\(ItemRecord.columnList)) VALUES "
        + Array(repeating: "(\(ItemRecord.placeholders))", count: rowsPerUpsert).joined(separator: ", ")
    // The inserts of `insertNew` say `OR FAIL`: a row that breaks a constraint stops the
    // statement and leaves the rows it wrote before, instead of undoing the statement's rows
    // (`ABORT`, the default). So SQLite keeps no statement journal: with `ABORT` each
    // statement first copied every page it changed that the file held before it (the pages
    // of the b-trees the rows are appended to) into an in-memory journal, a page copy and
    // allocations per page and statement: 11% of the `sqlite3` shell's CPU inserting
    // `tree100k`'s rows in 32-row statements, 7% of a first sync's writer thread. Nothing
    // needs one statement undone alone: a failure rolls the batch's savepoint back whole
    // (`insertNew`).
    private static let insertMany = "INSERT OR FAIL" + upsertMany.dropFirst("INSERT OR REPLACE".count)
    private static let insertOne = "INSERT OR FAIL" + upsert.dropFirst("INSERT OR REPLACE".count)
    private static let insertFreshOne =
        "INSERT OR FAIL INTO item (\(ItemRecord.freshColumnList)) VALUES (\(ItemRecord.freshPlaceholders))"
    private static let insertFreshMany =
        "INSERT OR FAIL INTO item (\(ItemRecord.freshColumnList)) VALUES "
        + Array(repeating: "(\(ItemRecord.freshPlaceholders))", count: rowsPerUpsert).joined(separator: ", ")

    /// Runs an upsert statement for as many records as it has rows, bound without
    /// `StatementArguments`.
    /// With `fresh`, the statement has the columns of ``ItemRecord/freshColumnList`` and
    /// every record ``ItemRecord/isFresh``.
    static func execute(
        _ statement: Statement, _ records: ArraySlice<ItemRecord>, arena: BindArena, fresh: Bool = false, in db: Database
    ) throws {
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        // Through the buffer: `for record in records`, and even `records[index].bind(…)` on
        // the slice or its buffer, copy every record (a retain and a release of each of its
        // strings) on the database's thread, the first sync's busiest. The rows are read in
        // place through `mutating` accessors that change nothing (see `boundByteCount`).
        var code = SQLITE_OK
        records.withUnsafeBufferPointer { buffer in
            let rows = UnsafeMutableBufferPointer(mutating: buffer)
            var bytes = 0
            for index in rows.indices { bytes += rows[index].boundByteCount }
            arena.reset(reserving: bytes)
            if fresh {
                for index in rows.indices where code == SQLITE_OK {
                    code = rows[index].bindFresh(to: raw, firstIndex: Int32(index) * ItemRecord.freshColumnCount + 1, arena: arena)
                }
            } else {
                for index in rows.indices where code == SQLITE_OK {
                    code = rows[index].bind(to: raw, firstIndex: Int32(index) * ItemRecord.columnCount + 1, arena: arena)
                }
            }
        }
        if code == SQLITE_OK {
            code = sqlite3_step(raw)
            if code == SQLITE_DONE { code = SQLITE_OK }
        }
        let message = code == SQLITE_OK ? nil : String(cString: sqlite3_errmsg(db.sqliteConnection))
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
        if code != SQLITE_OK {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    /// How many items a domain has, the root included.
    public func itemCount(domainID: Int64) throws(FileProviderError) -> Int {
        try read { db in
            // The counters, and the root (which they leave out).
            try Int.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT (SELECT COALESCE(SUM(items), 0) FROM itemCount WHERE domainID = ?1)
                            + (SELECT COUNT(*) FROM item WHERE domainID = ?1 AND path = '')
                        """), arguments: [domainID]) ?? 0
        }
    }

    /// The items (the root excluded) whose parent is none of `parents`, by their identifiers:
    /// what a walk of the store that listed exactly those folders did not reach.
    ///
    /// Visits the distinct parent identifiers of the domain's rows, one seek each in the
    /// `item_parent` index (a folder of 100 files is one seek, not 100 rows), and reads the rows
    /// of those outside `parents` only: a re-sync of a million unchanged items no longer reads
    /// every row for this (it did, a third of such a re-sync's time).
    public func items(domainID: Int64, outside parents: Set<ItemIdentifier>) throws(FileProviderError) -> [ItemRecord] {
        try read { db in
            let first = try db.cachedStatement(
                sql: "SELECT parentIdentifier FROM item INDEXED BY item_parent WHERE domainID = ? ORDER BY parentIdentifier LIMIT 1")
            let next = try db.cachedStatement(
                sql: """
                    SELECT parentIdentifier FROM item INDEXED BY item_parent
                    WHERE domainID = ? AND parentIdentifier > ? ORDER BY parentIdentifier LIMIT 1
                    """)
            var found: [ItemRecord] = []
            var parent = try String.fetchOne(first, arguments: [domainID])
            while let current = parent {
                if !parents.contains(ItemIdentifier(current)) {
                    found += try Self.children(domainID: domainID, parent: ItemIdentifier(current), in: db)
                }
                parent = try String.fetchOne(next, arguments: [domainID, current])
                // Each seek must move on. A text read back ends at its first NUL, so one stored
                // with a NUL (no store should make one) would be found again forever: then
                // every row is read instead.
                if let following = parent, !current.utf8.lexicographicallyPrecedes(following.utf8) {
                    return try Self.itemsByScan(domainID: domainID, outside: parents, in: db)
                }
            }
            return found
        }
    }

    /// ``items(domainID:outside:)`` by reading every row's identifier and parent.
    private static func itemsByScan(domainID: Int64, outside parents: Set<ItemIdentifier>, in db: Database) throws -> [ItemRecord] {
        var identifiers: [String] = []
        let links = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT identifier, parentIdentifier FROM item WHERE domainID = ? AND path <> ''"),
            arguments: [domainID])
        while let row = try links.next() {
            if !parents.contains(ItemIdentifier(row[1] as String)) { identifiers.append(row[0]) }
        }
        let select = try db.cachedStatement(sql: Self.selectByIdentifier)
        var found: [ItemRecord] = []
        for identifier in identifiers {
            if let row = try Row.fetchOne(select, arguments: [domainID, identifier]) { found.append(ItemRecord(row: row)) }
        }
        return found
    }

    /// The paths of a domain's dataless folders (by the partial index `item_dataless`: reads
    /// only them).
    public func datalessFolderPaths(domainID: Int64) throws(FileProviderError) -> [String] {
        try read { db in
            try String.fetchAll(
                db.cachedStatement(sql: "SELECT path FROM item INDEXED BY item_dataless WHERE domainID = ? AND isDataless"),
                arguments: [domainID])
        }
    }

    /// Up to `limit` paths of a domain's dataless folders, in the order `serve` populates them
    /// in the background: nearest the root first (a folder's parents come before it), then the
    /// most recently used (`itemUse`), then by path. Never more than `limit` rows in memory.
    /// - Throws: `localIOFailure` when the database fails.
    public func datalessFolderPaths(domainID: Int64, nearestFirst limit: Int) throws(FileProviderError) -> [String] {
        let sql = """
            SELECT i.path FROM item AS i INDEXED BY item_dataless
            LEFT JOIN itemUse AS u ON u.domainID = i.domainID AND u.identifier = i.identifier
            WHERE i.domainID = ? AND i.isDataless
            ORDER BY length(i.path) - length(replace(i.path, '/', '')), u.lastUsedAt IS NULL, u.lastUsedAt DESC, i.path
            LIMIT ?
            """
        return try read { db in
            try String.fetchAll(db.cachedStatement(sql: sql), arguments: [domainID, max(1, limit)])
        }
    }

    /// The paths of a domain's pinned folders.
    public func pinnedFolderPaths(domainID: Int64) throws(FileProviderError) -> [String] {
        try read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: "SELECT path FROM item INDEXED BY item_policy WHERE domainID = ? AND contentPolicy = 'eager' AND kind = 'folder'"),
                arguments: [domainID])
        }
    }

    /// Writes one item.
    public func save(_ record: ItemRecord) throws(FileProviderError) {
        try apply(domainID: record.domainID, upserts: [record], deletions: [])
    }

    /// How many items of each state a domain has, and how many are pinned.
    public func summary(domainID: Int64) throws(FileProviderError) -> ItemSummary {
        try read { db in
            var summary = ItemSummary()
            // Kept by triggers as items change (see the v9 migration): no count of the rows.
            let rows = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT state, items, pinned, bytes, datalessFolders FROM itemCount WHERE domainID = ?"),
                arguments: [domainID])
            for row in rows {
                let count: Int = row[1]
                switch ContentState(rawValue: row[0] as String) {
                case .placeholder: summary.placeholders = count
                case .materialized:
                    summary.materialized = count
                    summary.materializedBytes = row[3] ?? 0
                case .folder:
                    summary.folders = count
                    summary.datalessFolders = row[4] ?? 0
                case .symlink: summary.symlinks = count
                case nil: break
                }
                summary.pinned += row[2] ?? 0
            }
            return summary
        }
    }
}

/// Counts of a domain's items by state.
public struct ItemSummary: Codable, Hashable, Sendable {
    public var folders = 0
    /// Folders whose items are not in the replica yet (see ``ItemRecord/isDataless``).
    public var datalessFolders = 0
    public var placeholders = 0
    public var materialized = 0
    public var symlinks = 0
    public var pinned = 0
    public var materializedBytes: Int64 = 0
    public var total: Int { folders + placeholders + materialized + symlinks }
    public init() {}
}
