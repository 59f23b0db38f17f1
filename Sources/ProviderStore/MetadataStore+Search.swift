import Foundation
import GRDB
import ProviderCore

extension MetadataStore {
    /// A page of the items of a domain that `filter` matches: at most `limit` rows, in a
    /// stable order, starting after the row `after` names (the ``SearchCursor`` of the last
    /// row of the page before; `nil` for the first page). The filter runs in SQLite: only
    /// matching rows are read into records.
    ///
    /// A whole domain is read in primary key order (identifier), the table's own order; with
    /// name tests (``ItemFilter/names``), through the `item_name` index (each name beside its
    /// identifier, in the same order: about 35 bytes an item instead of the row's 190), and only
    /// the rows whose names match are read from the table; the first such search of a database
    /// builds that index (``ensureNameIndex()``). A subtree (``ItemFilter/below``) is
    /// read by the `item_path` index, in path order. The other tests use no index: the name
    /// globs that searches are mostly made of (`*.pdf`) cannot seek one, so every name of the
    /// domain is read once anyway.
    /// - Throws: `invalidArgument` for a regular expression that does not compile;
    ///   `localIOFailure` when the database fails.
    public func searchPage(domainID: Int64, filter: ItemFilter, after: SearchCursor?, limit: Int) throws(FileProviderError)
        -> [ItemRecord]
    {
        for regex in filter.regexes {
            if let problem = SearchFunctions.regexProblem(regex.text, ignoresCase: regex.ignoresCase) {
                throw FileProviderError(
                    .invalidArgument,
                    "the regular expression \(TerminalText.quoted(regex.text)) is not valid: \(problem) (a POSIX extended expression, as grep -E takes)"
                )
            }
        }
        var sql: String
        var arguments: StatementArguments = [domainID]
        var namesTested = false
        if filter.below.isEmpty && !filter.names.isEmpty {
            // The names from the index, in identifier order; the rows of those that match from
            // the table. (A subquery SQLite flattens into the join: the columns named outside
            // it are the table's only.) Without the index (it could not be built), the same
            // query reads the names from the table, in the same order.
            let indexed = try ensureNameIndex()
            var names = "SELECT identifier AS named FROM item \(indexed ? "INDEXED BY item_name " : "")WHERE domainID = ?"
            if let after {
                names += " AND identifier > ?"
                arguments += [after.identifier.rawValue]
            }
            Self.appendNameTests(of: filter, to: &names, &arguments)
            namesTested = true
            sql =
                "SELECT \(ItemRecord.columnList) FROM (\(names)) CROSS JOIN item ON item.domainID = ? AND item.identifier = named WHERE path <> ''"
            arguments += [domainID]
        } else if filter.below.isEmpty {
            sql = "SELECT \(ItemRecord.columnList) FROM item WHERE domainID = ? AND path <> ''"
            if let after {
                sql += " AND identifier > ?"
                arguments += [after.identifier.rawValue]
            }
        } else {
            let below = filter.below
            sql =
                "SELECT \(ItemRecord.columnList) FROM item INDEXED BY item_path WHERE domainID = ? AND path >= ? AND path < ? AND (path = ? OR path >= ?)"
            arguments += [below, below + "0", below, below + "/"]
            if let after {
                sql += " AND path > ?"
                arguments += [after.path]
            }
        }
        if !namesTested { Self.appendNameTests(of: filter, to: &sql, &arguments) }
        Self.appendTests(of: filter, to: &sql, &arguments)
        sql += namesTested ? " ORDER BY named LIMIT ?" : filter.below.isEmpty ? " ORDER BY identifier LIMIT ?" : " ORDER BY path LIMIT ?"
        arguments += [max(1, limit)]
        return try read { db in
            let rows = try Row.fetchCursor(db.makeStatement(sql: sql), arguments: arguments)
            var found: [ItemRecord] = []
            while let row = try rows.next() { found.append(ItemRecord(row: row)) }
            return found
        }
    }

    /// Builds the `item_name` index when the database has none, and says whether it has one.
    ///
    /// A first sync writes its rows without it (v24: a fourth b-tree per row was about 7% of a
    /// first sync's CPU, on its critical path, the database writer); the first name search of
    /// the database builds it (`CREATE INDEX`, one sort of every item's name, every domain's),
    /// and every write keeps it from then on. The build sorts in temporary files, not in memory
    /// as this connection's other statements do (`temp_store`): at 1,000,000 items the sort held
    /// 91 MiB in memory, 21 MiB with files (the `sqlite3` shell). A database where it cannot be
    /// built (a full disk, a read-only file) is searched without it, reading the names from the
    /// table: the same rows, more bytes read.
    /// - Throws: `localIOFailure` when the database cannot be read.
    func ensureNameIndex() throws(FileProviderError) -> Bool {
        try hasNameIndex() || buildNameIndex(emptyingTheLog: true)
    }

    /// Runs `CREATE INDEX IF NOT EXISTS item_name` (``ensureNameIndex()`` says why and how);
    /// `emptyingTheLog` then checkpoints the log into the database file and truncates it.
    /// - Returns: whether the index is there now (`false`: SQLite could not build it).
    private func buildNameIndex(emptyingTheLog: Bool) -> Bool {
        PoolCheck.note()
        do {
            // One statement, its own transaction: the index is there whole or not at all.
            try Self.retryingLockProtocolErrors {
                try pool.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA temp_store = FILE")
                    defer { try? db.execute(sql: "PRAGMA temp_store = MEMORY") }
                    try db.execute(sql: Self.createNameIndex)
                    // The index's 35 MB (at a million items) into the database file and the
                    // log emptied: a log left that long made the next process that opened the
                    // database read it all back (the next `find` took 0.15 s instead of 0.08).
                    // (Not from `serve`, whose other connections may be reading: TRUNCATE
                    // waits for them, and `serve`'s own next write empties the log.)
                    if emptyingTheLog { _ = try? Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
                }
            }
            return true
        } catch {
            return false
        }
    }

    /// Builds the `item_name` index that name searches read when the database lacks it, so that
    /// the first `find -name` after a first sync does not wait for it (about 0.5 s at a million
    /// items): `serve` calls it once when nothing else is due. One statement, its own
    /// transaction, as the first search would run it.
    /// - Returns: whether it was built now (`false`: it was there already).
    /// - Throws: `localIOFailure` when the database cannot be read, or the index cannot be built
    ///   (a full disk: searches then read the names from the table, and the first one tries again).
    public func prepareNameSearch() throws(FileProviderError) -> Bool {
        if try hasNameIndex() { return false }
        guard buildNameIndex(emptyingTheLog: false) else {
            throw FileProviderError(.localIOFailure, "SQLite could not build it (is the disk of the metadata database full?)")
        }
        return true
    }

    /// Whether the database holds the `item_name` index.
    /// - Throws: `localIOFailure` when the database cannot be read.
    func hasNameIndex() throws(FileProviderError) -> Bool {
        try read { db in
            try Int.fetchOne(db, sql: "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'item_name'") != nil
        }
    }

    /// What builds the `item_name` index (v23's, built on first use since v24).
    static let createNameIndex = "CREATE INDEX IF NOT EXISTS item_name ON item (domainID, identifier, filename)"

    /// The SQL of the filter's name tests, each `AND ...`, and their arguments.
    private static func appendNameTests(of filter: ItemFilter, to sql: inout String, _ arguments: inout StatementArguments) {
        for name in filter.names {
            sql += " AND fpk_fnmatch(?, filename, ?)"
            arguments += [name.text, name.ignoresCase ? SearchFunctions.caseFold : 0]
        }
    }

    /// The SQL of the filter's other tests, each `AND ...`, and their arguments.
    private static func appendTests(of filter: ItemFilter, to sql: inout String, _ arguments: inout StatementArguments) {
        for path in filter.paths {
            sql += " AND fpk_fnmatch(?, '/' || path, ?)"
            arguments += [path.text, path.ignoresCase ? SearchFunctions.caseFold : 0]
        }
        for regex in filter.regexes {
            sql += " AND fpk_regexp(?, '/' || path, ?)"
            arguments += [regex.text, regex.ignoresCase ? 1 : 0]
        }
        if !filter.kinds.isEmpty {
            let kinds = filter.kinds.map(\.rawValue).sorted()
            sql += " AND kind IN (" + kinds.map { _ in "?" }.joined(separator: ",") + ")"
            for kind in kinds { arguments += [kind] }
        }
        for test in filter.sizes {
            // GNU find rounds a size up to whole units before comparing.
            let rounded = "((size + \(test.unit - 1)) / \(test.unit))"
            switch test.comparison {
            case .less: sql += " AND \(rounded) < ?"
            case .equal: sql += " AND \(rounded) = ?"
            case .greater: sql += " AND \(rounded) > ?"
            }
            arguments += [test.count]
        }
        for bound in filter.modified {
            let operation: String
            switch bound.comparison {
            case .less: operation = bound.inclusive ? "<=" : "<"
            case .equal: operation = "="
            case .greater: operation = bound.inclusive ? ">=" : ">"
            }
            sql += " AND modificationDate \(operation) ?"
            arguments += [bound.date.timeIntervalSince1970]
        }
        if filter.downloaded { sql += " AND state = 'materialized'" }
        if filter.dataless { sql += " AND (state = 'placeholder' OR (kind = 'folder' AND isDataless))" }
        if let hash = filter.contentHash?.lowercased() {
            // The engine's own SHA-256 of the current contents, or the store's hash.
            let own = "(contentSHA256 IS NOT NULL AND hashedContentVersion = contentVersion)"
            if hash.contains(":") {
                sql += " AND (lower(contentHash) = ? OR (\(own) AND 'sha256:' || contentSHA256 = ?))"
            } else {
                sql += " AND (lower(substr(contentHash, instr(contentHash, ':') + 1)) = ? OR (\(own) AND contentSHA256 = ?))"
            }
            arguments += [hash, hash]
        }
    }
}

/// Where a page of ``MetadataStore/searchPage(domainID:filter:after:limit:)`` ended: its last
/// row's identifier and path.
public struct SearchCursor: Sendable, Hashable {
    public var identifier: ItemIdentifier
    public var path: String
    public init(identifier: ItemIdentifier, path: String) {
        self.identifier = identifier
        self.path = path
    }
    public init(_ record: ItemRecord) { self.init(identifier: record.identifier, path: record.path) }
}
