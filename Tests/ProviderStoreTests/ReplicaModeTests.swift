import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

/// `domain.replicaMode` (migration "v7: replica modes") and ``ReplicaMode``.
@Suite struct ReplicaModeTests {
    /// A database as the version before replica modes left it (migrated up to v6), with a domain.
    func oldDatabase(at url: URL) throws {
        let queue = try DatabaseQueue(path: url.path)
        try Migrations.migrator.migrate(queue, upTo: "v6: materialized and pinned items")
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO domain (name, backendKind, configuration, replicaPath, createdAt)
                    VALUES ('old', 'local', '{"root":"/srv"}', '/r/old', '2026-01-02 03:04:05.000')
                    """)
        }
        try queue.close()
    }

    @Test func anOldDatabaseGetsTheColumnWithPlaceholderFilesForItsDomains() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        try oldDatabase(at: url)

        let store = try MetadataStore(url: url)
        #expect(try store.appliedMigrations() == MigrationTests.expected)
        let old = try #require(try store.domain(named: "old"))
        #expect(old.replicaMode == .placeholderFiles)
        #expect(old.replicaPath == "/r/old")
        #expect(old.options == ["root": "/srv"])
        // A domain added from now on keeps the mode it is given.
        var added = DomainRecord(name: "new", backendKind: "local", configuration: [:], replicaPath: "/r/new")
        added.replicaMode = .dataless
        _ = try store.insertDomain(added)
        #expect(try store.domains().map(\.replicaMode) == [.dataless, .placeholderFiles])
        #expect(try store.integrityCheck() == "ok")
    }

    /// `setReplicaMode` (used by `domain convert`) changes the mode and nothing else of the
    /// domain; an unknown domain is an error, not a silent no-op.
    @Test func setReplicaModeChangesOnlyTheMode() throws {
        try withStore { store, _ in
            var record = DomainRecord(name: "d", backendKind: "local", configuration: ["root": "/srv"], replicaPath: "/r/d")
            record.lastError = "kept"
            record.failureCount = 3
            record = try store.insertDomain(record)
            let id = try #require(record.id)
            try store.setReplicaMode(domainID: id, .dataless)
            let stored = try #require(try store.domain(named: "d"))
            #expect(stored.replicaMode == .dataless)
            #expect(stored.lastError == "kept" && stored.failureCount == 3 && stored.options == ["root": "/srv"])
            try store.setReplicaMode(domainID: id, .placeholderFiles)
            #expect(try store.domain(named: "d")?.replicaMode == .placeholderFiles)
            #expect(throws: FileProviderError.self) { try store.setReplicaMode(domainID: id + 100, .dataless) }
        }
    }

    @Test func modesAreStoredByTheirNames() throws {
        try withStore { store, folder in
            var record = DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r/d")
            record.replicaMode = .dataless
            _ = try store.insertDomain(record)
            _ = try makeDomain(store, "p")
            let queue = try DatabaseQueue(path: folder.path("metadata.sqlite").path)
            defer { try? queue.close() }
            let stored = try queue.read { db in
                try Row.fetchAll(db, sql: "SELECT name, replicaMode FROM domain ORDER BY name").map {
                    "\($0[0] as String)=\($0[1] as String)"
                }
            }
            #expect(stored == ["d=dataless", "p=placeholder-files"])
            #expect(ReplicaMode.allCases.map(\.rawValue) == ["placeholder-files", "dataless"])
        }
    }

    /// A mode this version does not know (a database a newer version wrote) is refused with a
    /// message saying so, never read as another mode.
    @Test func anUnknownModeIsRefusedNotGuessed() throws {
        try withStore { store, folder in
            _ = try makeDomain(store, "future")
            let queue = try DatabaseQueue(path: folder.path("metadata.sqlite").path)
            try queue.write { db in try db.execute(sql: "UPDATE domain SET replicaMode = 'fuse'") }
            try queue.close()
            do {
                _ = try store.domain(named: "future")
                Issue.record("a domain with an unknown mode was read")
            } catch let error as FileProviderError {
                #expect(error.code == .localIOFailure)
                #expect(error.message.contains("unknown replica mode 'fuse'"), "\(error.message)")
            }
        }
    }
}
