import Foundation
import GRDB
import ProviderCore

/// One access rule by program (`accessRule`): what an on-access request of a program that the
/// rule names does in one domain (`domainID`) or in all (`nil`).
public struct AccessRuleRecord: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "accessRule"

    /// What a rule matches a program by.
    public enum Kind: String, Codable, Sendable, CaseIterable, DatabaseValueConvertible {
        /// The executable's file name or the command name (`/proc/PID/comm`, 15 bytes at most).
        case program
        /// The executable's full path (`/proc/PID/exe`).
        case executable
        /// The systemd unit (`/proc/PID/cgroup`).
        case unit
    }

    /// What the matched program's request does.
    public enum Action: String, Codable, Sendable, CaseIterable, DatabaseValueConvertible {
        /// Fetches what the program reads (the default for every program).
        case fetch
        /// Refuses the program's accesses of files not downloaded at once, fetching nothing.
        case deny
        /// Serves the bytes already present; refuses, fetching nothing, where bytes are missing.
        case presentOnly = "present-only"

        /// How strict: a higher one wins between rules of the same scope and kind.
        public var strictness: Int {
            switch self {
            case .fetch: 0
            case .presentOnly: 1
            case .deny: 2
            }
        }
    }

    public var id: Int64?
    /// The domain the rule applies in; `nil`: every domain.
    public var domainID: Int64?
    public var kind: Kind
    /// The name, path or unit matched (exactly).
    public var value: String
    public var action: Action
    /// Shipped with FileProviderKit (the content indexers), not added by a user.
    public var isDefault: Bool
    public var createdAt: Date

    public init(
        id: Int64? = nil, domainID: Int64?, kind: Kind, value: String, action: Action, isDefault: Bool = false, createdAt: Date = Date()
    ) {
        self.id = id
        self.domainID = domainID
        self.kind = kind
        self.value = value
        self.action = action
        self.isDefault = isDefault
        self.createdAt = createdAt
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }

    /// The content indexers denied by default: GNOME's (localsearch, formerly tracker) and
    /// KDE's (Baloo). They read every file they find, and would download a whole store.
    public static let defaultDeniedPrograms = [
        "localsearch-3", "localsearch-extractor-3", "tracker-miner-fs-3", "tracker-extract-3", "baloo_file", "baloo_file_extractor",
    ]
}

/// The last refusal of a program's access to one file by an access rule (`accessRefusal`),
/// with how many refusals the file has had: `why` names the program, `status` sums the counts.
public struct AccessRefusalRecord: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "accessRefusal"
    public var domainID: Int64
    /// The file's path in the domain (relative, no leading `/`).
    public var path: String
    /// The refused program's name (``ProcessIdentity/programName``).
    public var program: String
    public var executable: String?
    public var unit: String?
    public var pid: Int32
    /// The rule that refused, in words (`deny program baloo_file (default)`).
    public var rule: String
    /// Refusals of this file so far.
    public var count: Int
    /// When the last one was.
    public var at: Date

    public init(
        domainID: Int64, path: String, program: String, executable: String?, unit: String?, pid: Int32, rule: String, count: Int = 1,
        at: Date = Date()
    ) {
        self.domainID = domainID
        self.path = path
        self.program = program
        self.executable = executable
        self.unit = unit
        self.pid = pid
        self.rule = rule
        self.count = count
        self.at = at
    }
}

extension MetadataStore {
    /// Every access rule, the global ones (no domain) first, then by domain, kind and value.
    /// - Throws: `localIOFailure` when the database fails.
    public func accessRules() throws(FileProviderError) -> [AccessRuleRecord] {
        try read { db in
            try AccessRuleRecord.order(sql: "domainID IS NOT NULL, domainID, kind, value").fetchAll(db)
        }
    }

    /// Adds `rule`, replacing a rule of the same scope, kind and value (a shipped default too:
    /// the user's rule takes its place). Returns the rule it replaced, if any.
    /// - Throws: `localIOFailure` when the database fails.
    @discardableResult
    public func addAccessRule(_ rule: AccessRuleRecord) throws(FileProviderError) -> AccessRuleRecord? {
        try write { db in
            let old = try Self.accessRule(db, domainID: rule.domainID, kind: rule.kind, value: rule.value)
            if let old { try old.delete(db) }
            var rule = rule
            rule.id = nil
            try rule.insert(db)
            return old
        }
    }

    /// Removes the rule of a scope (`nil`: global), kind and value; returns it, or `nil` when
    /// there is none.
    /// - Throws: `localIOFailure` when the database fails.
    public func removeAccessRule(domainID: Int64?, kind: AccessRuleRecord.Kind, value: String) throws(FileProviderError)
        -> AccessRuleRecord?
    {
        try write { db in
            let old = try Self.accessRule(db, domainID: domainID, kind: kind, value: value)
            if let old { try old.delete(db) }
            return old
        }
    }

    private static func accessRule(_ db: Database, domainID: Int64?, kind: AccessRuleRecord.Kind, value: String) throws
        -> AccessRuleRecord?
    {
        try AccessRuleRecord.filter(sql: "domainID IS ? AND kind = ? AND value = ?", arguments: [domainID, kind, value]).fetchOne(db)
    }

    /// Adds refusals: each file's row keeps the last refusal and the sum of the counts.
    /// - Throws: `localIOFailure` when the database fails.
    public func recordAccessRefusals(_ refusals: [AccessRefusalRecord]) throws(FileProviderError) {
        guard !refusals.isEmpty else { return }
        try write { db in
            for refusal in refusals {
                var row = refusal
                if let old = try AccessRefusalRecord.fetchOne(db, key: ["domainID": refusal.domainID, "path": refusal.path]) {
                    row.count += old.count
                }
                // A refusal of a domain removed meanwhile has nowhere to go.
                guard try DomainRecord.exists(db, key: refusal.domainID) else { continue }
                try row.save(db)
            }
        }
    }

    /// The last refusal of an access to the file at `path` (relative) of a domain, or `nil`.
    /// - Throws: `localIOFailure` when the database fails.
    public func accessRefusal(domainID: Int64, path: String) throws(FileProviderError) -> AccessRefusalRecord? {
        try read { db in try AccessRefusalRecord.fetchOne(db, key: ["domainID": domainID, "path": path]) }
    }

    /// How many accesses of a domain's files rules refused, and the last refusal.
    /// - Throws: `localIOFailure` when the database fails.
    public func accessRefusals(domainID: Int64) throws(FileProviderError) -> (count: Int, last: AccessRefusalRecord?) {
        try read { db in
            let count =
                try Int.fetchOne(db, sql: "SELECT IFNULL(SUM(count), 0) FROM accessRefusal WHERE domainID = ?", arguments: [domainID]) ?? 0
            let last = try AccessRefusalRecord.filter(Column("domainID") == domainID).order(Column("at").desc).fetchOne(db)
            return (count, last)
        }
    }
}
