import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

/// A new database gets its schema in one transaction (``Migrations/createSchema(in:)``); an
/// existing one the migrations it has not had, one by one.
@Suite struct SchemaCreationTests {
    /// The schema, the migrations recorded and the rows the migrations write (the default access
    /// rules), as `sqlite_master` and the tables hold them.
    static func contents(of pool: DatabasePool) throws -> [[String]] {
        try pool.read { db in
            let schema = try Row.fetchAll(db, sql: "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
                .map { row in ["type", "name", "tbl_name", "sql"].map { (row[$0] as String?) ?? "NULL" } }
            let applied = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
            let rules = try Row.fetchAll(db, sql: "SELECT id, domainID, kind, value, action, isDefault FROM accessRule ORDER BY id")
                .map { "\($0)" }
            let sequences = try Row.fetchAll(db, sql: "SELECT name, seq FROM sqlite_sequence ORDER BY name").map { "\($0)" }
            return schema + [applied, rules, sequences]
        }
    }

    /// The statements that make what the migrations make in `db` (an empty database they ran
    /// on), as ``FreshSchema/sql`` holds them: its tables, indexes and triggers in the order they
    /// were made, then the rows the migrations wrote, a `createdAt` as the time they run.
    static func freshSchemaSQL(of db: Database) throws -> String {
        var lines: [String] = []
        for sql in try String.fetchAll(
            db, sql: "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
        {
            lines.append(sql + ";")
        }
        let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
        for table in tables {
            let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?) ORDER BY cid", arguments: [table])
            let quoted = columns.map { "quote(\"\($0)\")" }.joined(separator: ", ")
            for row in try Row.fetchAll(db, sql: "SELECT \(quoted) FROM \"\(table)\"") {
                let values = columns.indices.map { index in
                    columns[index] == "createdAt" ? "strftime('%Y-%m-%d %H:%M:%f', 'now')" : (row[index] as String? ?? "NULL")
                }
                lines.append("INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")));")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// ``FreshSchema/sql`` is what the migrations make: when a migration is added, this test
    /// writes the statements to put there.
    @Test func theFreshSchemaIsWhatTheMigrationsMake() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let oneByOne = try DatabasePool(path: folder.path("one.sqlite").path)
        try Migrations.migrator.migrate(oneByOne)
        let expected = try oneByOne.read { try Self.freshSchemaSQL(of: $0) }
        if FreshSchema.sql != expected {
            // As the lines between `#"""` and `"""#` in FreshSchema.swift, indented as there.
            let lines = expected.split(separator: "\n", omittingEmptySubsequences: false).map { $0.isEmpty ? "" : "        " + $0 }
            let written = FileManager.default.temporaryDirectory.appendingPathComponent("FreshSchema.sql")
            try? Data((lines.joined(separator: "\n") + "\n").utf8).write(to: written)
            Issue.record(
                "FreshSchema.sql is not what the migrations make: put the lines of \(written.path) between its #\"\"\" and \"\"\"# in Sources/ProviderStore/FreshSchema.swift"
            )
        }
    }

    /// Every migration in one transaction gives what running them one by one gives: the same
    /// tables, indexes and triggers (their SQL), the same migrations recorded as applied, the
    /// same rows.
    @Test func aNewDatabaseGetsTheSchemaTheMigrationsGiveOneByOne() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let oneByOne = try DatabasePool(path: folder.path("one.sqlite").path)
        try Migrations.migrator.migrate(oneByOne)
        let together = try DatabasePool(path: folder.path("together.sqlite").path)
        try Migrations.migrate(together)
        let expected = try Self.contents(of: oneByOne)
        #expect(try Self.contents(of: together) == expected)
        #expect(try together.read { try Migrations.migrator.appliedMigrations($0) }.count == Migrations.list.steps.count)
        #expect(try together.read { db in try Bool.fetchOne(db, sql: "PRAGMA foreign_keys") } == true)
        // Opened again, nothing is left to run.
        try Migrations.migrate(together)
        #expect(try Self.contents(of: together) == expected)
    }

    /// A database some migrations behind gets the others one by one, and ends as a new one.
    @Test func anOlderDatabaseGetsTheMigrationsItHasNotHad() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let old = try DatabasePool(path: folder.path("old.sqlite").path)
        try Migrations.migrator.migrate(old, upTo: "v7: replica modes")
        try Migrations.migrate(old)
        let new = try DatabasePool(path: folder.path("new.sqlite").path)
        try Migrations.migrate(new)
        #expect(try Self.contents(of: old) == Self.contents(of: new))
    }
}
