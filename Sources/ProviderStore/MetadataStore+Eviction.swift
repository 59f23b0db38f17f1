import Foundation
import GRDB
import ProviderCore

/// The bytes of downloaded contents a domain holds, as automatic eviction counts them.
public struct CacheUsage: Codable, Hashable, Sendable {
    /// Bytes of materialized files (each file's size as written, else the item's size).
    public var materialized: Int64 = 0
    /// Bytes present of files that are partly downloaded (progressive hydration).
    public var partial: Int64 = 0
    /// Both, saturating.
    public var total: Int64 { materialized.addingReportingOverflow(partial).overflow ? .max : materialized + partial }

    public init(materialized: Int64 = 0, partial: Int64 = 0) {
        self.materialized = materialized
        self.partial = partial
    }
}

/// A file automatic eviction may take: a materialized file or one partly downloaded.
public struct EvictionCandidate: Hashable, Sendable {
    public var identifier: ItemIdentifier
    public var path: String
    /// Partly downloaded (a dataless file with present ranges), not materialized.
    public var isPartial: Bool
    /// The bytes it holds.
    public var bytes: Int64
    /// When programs last used it, in seconds since 1970; 0 when no use was recorded (the
    /// oldest).
    public var lastUsedAt: Double
    /// The content policy set on the file itself (``ItemRecord/contentPolicy``); `nil` when it
    /// inherits its folder's.
    public var contentPolicy: ContentPolicy? = nil

    /// Where the next page of candidates starts (after this one).
    public var cursor: EvictionCursor { EvictionCursor(lastUsedAt: lastUsedAt, identifier: identifier.rawValue) }
}

/// A position in the least-recently-used order of candidates.
public struct EvictionCursor: Hashable, Sendable {
    public var lastUsedAt: Double
    public var identifier: String

    /// Before every candidate.
    public static let start = EvictionCursor(lastUsedAt: -Double.greatestFiniteMagnitude, identifier: "")
}

/// One file automatic eviction took (table `eviction`).
public struct EvictionRecord: Codable, Hashable, Sendable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "eviction"
    public var id: Int64?
    public var domainID: Int64
    /// The file's path, relative to the replica root.
    public var path: String
    /// Bytes given back.
    public var size: Int64
    /// Why, in words ("over the budget of photos: 21.3 GiB used of 20 GiB").
    public var reason: String
    public var at: Date

    public init(domainID: Int64, path: String, size: Int64, reason: String, at: Date = Date()) {
        self.domainID = domainID
        self.path = path
        self.size = size
        self.reason = reason
        self.at = at
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

extension MetadataStore {
    /// The keys of the home's settings (table `setting`).
    public enum SettingKey {
        /// The budget of all domains together, in bytes.
        public static let cacheBudget = "cacheBudget"
        /// The bytes the replicas' file systems keep free.
        public static let freeSpaceFloor = "freeSpaceFloor"
    }

    /// The bytes of contents a domain holds: its materialized files (the size as written, else
    /// the item's size) and the present ranges of files that are not materialized. Sums are
    /// taken as floating point (`TOTAL`), so no count from the database can overflow.
    /// - Throws: `localIOFailure` when the database fails.
    public func cacheUsage(domainID: Int64) throws(FileProviderError) -> CacheUsage {
        try read { db in
            let materialized =
                try Double.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT TOTAL(CASE WHEN localSize >= 0 THEN localSize ELSE MAX(size, 0) END)
                            FROM item INDEXED BY item_materialized WHERE domainID = ? AND state = 'materialized' AND kind = 'file'
                            """), arguments: [domainID]) ?? 0
            let partial =
                try Double.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT TOTAL(MAX(0, p."end" - p.start)) FROM presentRange p
                            JOIN item i ON i.domainID = p.domainID AND i.identifier = p.identifier
                            WHERE p.domainID = ? AND i.state = 'placeholder'
                            """), arguments: [domainID]) ?? 0
            return CacheUsage(materialized: Self.bytes(materialized), partial: Self.bytes(partial))
        }
    }

    /// The candidates query; `below` adds a subtree filter on `?5` (the `item_path` index then
    /// serves, else the partial index of materialized files).
    private static func candidatesSQL(below: Bool) -> String {
        let index = below ? "" : "INDEXED BY item_materialized"
        let subtree = { (column: String) in
            below ? "AND (\(column) = ?5 OR (\(column) >= ?5 || '/' AND \(column) < ?5 || '0'))" : ""
        }
        return """
            SELECT c.identifier, c.path, c.partial, c.bytes, COALESCE(u.lastUsedAt, 0) AS used, c.contentPolicy FROM (
              SELECT identifier, path, 0 AS partial, CASE WHEN localSize >= 0 THEN localSize ELSE MAX(size, 0) END AS bytes,
                contentPolicy
                FROM item \(index) WHERE domainID = ?1 AND state = 'materialized' AND kind = 'file' \(subtree("path"))
              UNION ALL
              SELECT i.identifier, i.path, 1, TOTAL(MAX(0, p."end" - p.start)), i.contentPolicy FROM presentRange p
                JOIN item i ON i.domainID = p.domainID AND i.identifier = p.identifier
                WHERE p.domainID = ?1 AND i.state = 'placeholder' AND i.kind = 'file' \(subtree("i.path")) GROUP BY i.identifier
            ) c LEFT JOIN itemUse u ON u.domainID = ?1 AND u.identifier = c.identifier
            WHERE (COALESCE(u.lastUsedAt, 0), c.identifier) > (?2, ?3)
            ORDER BY used, c.identifier LIMIT ?4
            """
    }
    private static let allCandidatesSQL = candidatesSQL(below: false)
    private static let candidatesBelowSQL = candidatesSQL(below: true)

    /// The next `limit` files of a domain that hold contents (materialized, or partly present),
    /// least recently used first (a file without a recorded use first of all), after `cursor`;
    /// with `below`, only that path and what is under it ("" is the whole domain).
    /// - Throws: `localIOFailure` when the database fails.
    public func evictionCandidates(domainID: Int64, after cursor: EvictionCursor = .start, below: String? = nil, limit: Int = 256)
        throws(FileProviderError) -> [EvictionCandidate]
    {
        try read { db in
            var arguments: StatementArguments = [domainID, cursor.lastUsedAt, cursor.identifier, max(1, limit)]
            let sql: String
            if let below, !below.isEmpty {
                sql = Self.candidatesBelowSQL
                arguments += [below]
            } else {
                sql = Self.allCandidatesSQL
            }
            return try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
                let used: Double = row[4]
                return EvictionCandidate(
                    identifier: ItemIdentifier(row[0] as String), path: row[1], isPartial: (row[2] as Int64) != 0,
                    bytes: Self.bytes(row[3] as Double), lastUsedAt: used.isFinite ? used : 0,
                    contentPolicy: (row[5] as String?).map { ContentPolicy(rawValue: $0) ?? .eager })
            }
        }
    }

    /// `comparison` is ">=" for the first page (from ""), ">" after an identifier.
    private static func selectFilesWithOwnPolicy(_ comparison: String) -> String {
        """
        SELECT i.identifier, i.path, i.state, CASE WHEN i.localSize >= 0 THEN i.localSize ELSE MAX(i.size, 0) END,
          (SELECT TOTAL(MAX(0, p."end" - p.start)) FROM presentRange p WHERE p.domainID = i.domainID AND p.identifier = i.identifier),
          EXISTS (SELECT 1 FROM presentRange p WHERE p.domainID = i.domainID AND p.identifier = i.identifier)
        FROM item i INDEXED BY item_policy
        WHERE i.domainID = ?1 AND i.contentPolicy = ?2 AND i.kind = 'file' AND i.identifier \(comparison) ?3
        ORDER BY i.identifier LIMIT ?4
        """
    }
    private static let selectFilesWithOwnPolicyFirst = selectFilesWithOwnPolicy(">=")
    private static let selectFilesWithOwnPolicyAfter = selectFilesWithOwnPolicy(">")

    /// The files of a domain whose own content policy is `policy` (set on the file itself, not
    /// inherited) that hold contents, as candidates: materialized ones, and placeholders with
    /// present ranges. At most `limit` such files of the domain are looked at, in identifier
    /// order from after `after` (from the first with `nil`), through the partial index
    /// `item_policy`; returns the candidates among them and where the next page starts (`nil`
    /// after the last). Each page is its own transaction, so evicting a page's files does not
    /// change the next page.
    /// - Throws: `localIOFailure` when the database fails.
    public func filesHoldingContents(domainID: Int64, ownPolicy policy: ContentPolicy, after: String?, limit: Int)
        throws(FileProviderError) -> (candidates: [EvictionCandidate], next: String?)
    {
        try read { db in
            let limit = max(1, limit)
            let statement = try db.cachedStatement(
                sql: after == nil ? Self.selectFilesWithOwnPolicyFirst : Self.selectFilesWithOwnPolicyAfter)
            let rows = try Row.fetchCursor(statement, arguments: [domainID, policy.rawValue, after ?? "", limit])
            var candidates: [EvictionCandidate] = []
            var (count, last) = (0, after)
            while let row = try rows.next() {
                count += 1
                let identifier: String = row[0]
                last = identifier
                let state: String = row[2]
                let isPartial: Bool
                let bytes: Int64
                if state == ContentState.materialized.rawValue {
                    (isPartial, bytes) = (false, Self.bytes(row[3] as Double))
                } else if state == ContentState.placeholder.rawValue, row[5] as Bool {
                    (isPartial, bytes) = (true, Self.bytes(row[4] as Double))
                } else {
                    continue
                }
                candidates.append(
                    EvictionCandidate(
                        identifier: ItemIdentifier(identifier), path: row[1], isPartial: isPartial, bytes: bytes, lastUsedAt: 0,
                        contentPolicy: policy))
            }
            return (candidates, count < limit ? nil : last)
        }
    }

    /// Records when programs last used files, by domain and item, in one transaction (a later
    /// date replaces an earlier one; an earlier one never replaces a later). The uses of a domain
    /// that is no longer there are dropped.
    /// - Throws: `localIOFailure` when the database fails.
    public func recordUses(_ uses: [Int64: [ItemIdentifier: Date]]) throws(FileProviderError) {
        if uses.values.allSatisfy(\.isEmpty) { return }
        try write { db in
            // A row per file read or downloaded: bound through SQLite's calls (``ParameterBinder``).
            var upsert = ParameterBinder(
                try db.cachedStatement(
                    sql: """
                        INSERT INTO itemUse (domainID, identifier, lastUsedAt) VALUES (?, ?, ?)
                        ON CONFLICT (domainID, identifier) DO UPDATE SET lastUsedAt = MAX(lastUsedAt, excluded.lastUsedAt)
                        """),
                reserving: 0)
            let exists = try db.cachedStatement(sql: "SELECT 1 FROM domain WHERE id = ?")
            for (domainID, byItem) in uses {
                // A domain removed since its files were read: its uses go with it (they would
                // break the foreign key, and the transaction with the other domains' uses).
                guard try Int.fetchOne(exists, arguments: [domainID]) != nil else { continue }
                for (identifier, date) in byItem {
                    upsert.reserve(identifier.rawValue.utf8.count)
                    upsert.bind(domainID)
                    upsert.bind(identifier.rawValue)
                    upsert.bind(date.timeIntervalSince1970)
                    try upsert.execute(in: db)
                }
            }
        }
    }

    /// Records evictions, keeping the newest `keep` of each domain.
    /// - Throws: `localIOFailure` when the database fails.
    public func recordEvictions(_ records: [EvictionRecord], keep: Int = 200) throws(FileProviderError) {
        if records.isEmpty { return }
        try write { db in
            for var record in records { try record.insert(db) }
            for domainID in Set(records.map(\.domainID)) {
                try db.execute(
                    sql: """
                        DELETE FROM eviction WHERE domainID = ?1 AND id NOT IN
                          (SELECT id FROM eviction WHERE domainID = ?1 ORDER BY at DESC, id DESC LIMIT ?2)
                        """, arguments: [domainID, max(0, keep)])
            }
        }
    }

    /// A domain's last evictions, newest first.
    /// - Throws: `localIOFailure` when the database fails.
    public func evictions(domainID: Int64, limit: Int = 10) throws(FileProviderError) -> [EvictionRecord] {
        try read { db in
            try EvictionRecord.filter(Column("domainID") == domainID).order(Column("at").desc, Column("id").desc).limit(max(0, limit))
                .fetchAll(db)
        }
    }

    /// Sets a domain's cache budget (bytes; `nil`: none of its own), and nothing else of it.
    /// - Throws: `invalidArgument` for a negative budget; `providerDomainNotFound` when no
    ///   domain has that id; `localIOFailure` when the database fails.
    public func setCacheBudget(domainID: Int64, _ bytes: Int64?) throws(FileProviderError) {
        if let bytes, bytes < 0 { throw FileProviderError(.invalidArgument, "a cache budget cannot be negative") }
        let changed = try write { db in
            try db.execute(sql: "UPDATE domain SET cacheBudget = ? WHERE id = ?", arguments: [bytes, domainID])
            return db.changesCount
        }
        if changed == 0 { throw FileProviderError(.providerDomainNotFound, "no domain with id \(domainID)") }
    }

    /// Sets how a dataless domain fetches files on access, and nothing else of it.
    /// - Throws: `providerDomainNotFound` when no domain has that id; `localIOFailure` when the
    ///   database fails.
    public func setHydration(domainID: Int64, _ hydration: Hydration) throws(FileProviderError) {
        let changed = try write { db in
            try db.execute(sql: "UPDATE domain SET hydration = ? WHERE id = ?", arguments: [hydration.rawValue, domainID])
            return db.changesCount
        }
        if changed == 0 { throw FileProviderError(.providerDomainNotFound, "no domain with id \(domainID)") }
    }

    /// The identifiers of a domain's items with an upload not finished (a `modify`, `move` or
    /// `delete` in the journal that is not done): their local state is not in the store yet.
    /// - Throws: `localIOFailure` when the database fails.
    public func itemsWithUnfinishedOperations(domainID: Int64) throws(FileProviderError) -> Set<ItemIdentifier> {
        try read { db in
            var result: Set<ItemIdentifier> = []
            let keys = try String.fetchCursor(
                db, sql: "SELECT templateIdentifier FROM journal WHERE domainID = ? AND state <> 'done'", arguments: [domainID])
            while let key = try keys.next() {
                for operation in ["modify:", "move:", "delete:"] where key.hasPrefix(operation) {
                    result.insert(ItemIdentifier(String(key.dropFirst(operation.count))))
                }
            }
            return result
        }
    }

    /// A byte count from a floating-point sum: at least 0, at most `Int64.max`.
    static func bytes(_ value: Double) -> Int64 {
        guard value.isFinite, value > 0 else { return 0 }
        return value >= 9.2e18 ? .max : Int64(value)
    }
}
