import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

/// `status` and `domain list` read counters the database keeps as items change (triggers), not
/// a count of the rows: whatever writes the items, the counters say what a count would.
@Suite struct ItemCountTests {
    /// What a count of the rows says.
    static func counted(_ store: MetadataStore, _ domainID: Int64) throws -> ItemSummary {
        var summary = ItemSummary()
        for record in try store.descendants(domainID: domainID, of: "") where !record.path.isEmpty {
            switch record.state {
            case .folder:
                summary.folders += 1
                if record.isDataless { summary.datalessFolders += 1 }
            case .placeholder: summary.placeholders += 1
            case .materialized:
                summary.materialized += 1
                summary.materializedBytes += record.size
            case .symlink: summary.symlinks += 1
            }
            if record.contentPolicy == .eager { summary.pinned += 1 }
        }
        return summary
    }

    /// Expects each domain's counters to say what a count of its rows says, and its item count
    /// (the counters and the root) to be its rows.
    static func expectCounted(
        _ store: MetadataStore, _ domains: [Int64], after step: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for domain in domains {
            #expect(try store.summary(domainID: domain) == (try counted(store, domain)), "after \(step)", sourceLocation: sourceLocation)
            let rows =
                try store.descendants(domainID: domain, of: "").count + (try store.item(domainID: domain, path: "") == nil ? 0 : 1)
            #expect(try store.itemCount(domainID: domain) == rows, "after \(step)", sourceLocation: sourceLocation)
        }
    }

    @Test func theCountersFollowEveryKindOfWrite() throws {
        try withStore { store, _ in
            let id = try makeDomain(store, "d")
            let other = try makeDomain(store, "other")
            func check(_ step: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
                try Self.expectCounted(store, [id, other], after: step, sourceLocation: sourceLocation)
            }
            var folder = record(id, "f", folder: true)
            folder.isDataless = true
            try store.apply(
                domainID: id,
                upserts: [record(id, "", folder: true), folder] + (0..<20).map { record(id, "f/\($0).bin", size: Int64($0 * 100)) },
                deletions: [])
            try store.apply(domainID: other, upserts: [record(other, "", folder: true), record(other, "x.bin", size: 7)], deletions: [])
            try check("inserts")
            // Rows replaced (INSERT OR REPLACE): downloaded, bigger, a folder populated.
            var changed = (0..<5).map { index in
                var file = record(id, "f/\(index).bin", size: 1_000 + Int64(index))
                file.state = .materialized
                return file
            }
            folder.isDataless = false
            changed.append(folder)
            try store.apply(domainID: id, upserts: changed, deletions: [])
            try check("replacements")
            try store.setContentPolicy(.eager, domainID: id, path: "f/7.bin", clearingBelow: false)
            try store.setContentPolicy(.eager, domainID: id, path: "f", clearingBelow: false)
            try check("policies")
            try store.apply(domainID: id, upserts: [], deletions: [ItemIdentifier("f/3.bin"), ItemIdentifier("f/12.bin")])
            try check("deletions")
            try store.renameSubtree(domainID: id, from: "f", to: "g")
            try check("a folder moved")
            try store.deleteSubtree(domainID: id, path: "g")
            try check("a folder deleted")
            try store.deleteDomain(id: other)
            #expect(try store.summary(domainID: other) == ItemSummary())
            try check("a domain removed")
        }
    }

    /// A first sync's batches of new rows are counted once per batch (the insert trigger is
    /// paused inside the transaction); a batch holding a row the database has after all (same
    /// identifier, or another identifier at the same path) is written as any other, and the
    /// counters still say what a count would.
    @Test func newRowsCountedPerBatchMatchACount() throws {
        try withStore { store, _ in
            let id = try makeDomain(store, "d")
            func check(_ step: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
                try Self.expectCounted(store, [id], after: step, sourceLocation: sourceLocation)
            }
            var folder = record(id, "f", folder: true)
            folder.isDataless = true
            var pinned = record(id, "f/pinned.bin", size: 5)
            pinned.contentPolicy = .eager
            var downloaded = record(id, "f/down.bin", size: 77)
            downloaded.state = .materialized
            try store.insertNew(
                domainID: id,
                records: [record(id, "", folder: true), folder, pinned, downloaded] + (0..<40).map { record(id, "f/\($0).bin", size: 3) })
            try check("new rows")
            #expect(try store.summary(domainID: id).materializedBytes == 77)
            // One row of the batch is there already: the batch replaces it, as apply does.
            var again = record(id, "f/7.bin", size: 9)
            again.state = .materialized
            try store.insertNew(domainID: id, records: (40..<80).map { record(id, "f/\($0).bin", size: 3) } + [again])
            try check("a batch with a row that was there")
            // Another identifier at a path the database has: replaced too.
            var samePath = record(id, "f/8.bin", size: 4)
            samePath.identifier = ItemIdentifier("other-8")
            try store.insertNew(domainID: id, records: [samePath])
            try check("a row at a path that was there")
            #expect(try store.item(domainID: id, path: "f/8.bin")?.identifier == ItemIdentifier("other-8"))
            // The pause never outlives its transaction.
            try store.apply(domainID: id, upserts: [record(id, "f/after.bin", size: 1)], deletions: [])
            try check("a row written afterwards")
            // Rows written again, many to a statement, one of them at another identifier's path
            // (that row goes): the counters still say what a count says.
            var rewritten = (10..<50).map { index in
                var row = record(id, "f/\(index).bin", size: 6)
                row.state = index.isMultiple(of: 2) ? .materialized : .placeholder
                return row
            }
            var elsewhere = record(id, "f/60.bin", size: 2)
            elsewhere.identifier = ItemIdentifier("other-60")
            rewritten[3] = elsewhere
            try store.apply(domainID: id, upserts: rewritten, deletions: [])
            try check("rows written again, one at another's path")
            #expect(try store.item(domainID: id, path: "f/60.bin")?.identifier == ItemIdentifier("other-60"))
            #expect(try store.item(domainID: id, identifier: ItemIdentifier("f/60.bin")) == nil)
            #expect(try store.item(domainID: id, path: "f/12.bin")?.state == .materialized)
            #expect(try store.item(domainID: id, path: "f/49.bin")?.size == 6)
        }
    }

    /// Downloads are recorded with the triggers off and counted per batch, from the rows as
    /// they were before and after: whatever state, policy and size the rows had (a placeholder,
    /// a pinned one, a file downloaded before at another size, a row moved or gone meanwhile,
    /// a folder), the counters say what a count says.
    @Test func recordedDownloadsCountedPerBatchMatchACount() throws {
        try withStore { store, _ in
            let id = try makeDomain(store, "d")
            let other = try makeDomain(store, "other")
            func check(_ step: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
                try Self.expectCounted(store, [id, other], after: step, sourceLocation: sourceLocation)
            }
            var pinned = record(id, "f/pinned.bin", size: 5)
            pinned.contentPolicy = .eager
            var before = record(id, "f/before.bin", size: 50)
            before.state = .materialized
            var folder = record(id, "f/sub", folder: true)
            folder.isDataless = true
            try store.apply(
                domainID: id,
                upserts: [
                    record(id, "", folder: true), record(id, "f", folder: true), pinned, before, folder, record(id, "f/moved.bin", size: 8),
                ]
                    + (0..<100).map { record(id, "f/\($0).bin", size: Int64($0)) },
                deletions: [])
            try store.apply(domainID: other, upserts: [record(other, "", folder: true), record(other, "x.bin", size: 7)], deletions: [])
            try check("inserts")
            func downloaded(_ path: String, size: Int64) throws -> ItemRecord {
                var row = try #require(try store.item(domainID: id, path: path))
                row.state = .materialized
                row.size = size
                row.localContentVersion = row.contentVersion
                row.localSize = size
                return row
            }
            var moved = try downloaded("f/moved.bin", size: 9)
            moved.path = "f/moved-again.bin"
            moved.filename = "moved-again.bin"
            var gone = record(id, "f/gone.bin", size: 3)
            gone.state = .materialized
            var populated = try #require(try store.item(domainID: id, path: "f/sub"))
            populated.isDataless = false
            // More rows than one statement reads (64 identifiers per statement).
            let rows = try (0..<100).map { try downloaded("f/\($0).bin", size: Int64($0) * 3) }
            try store.recordDownloads(
                domainID: id,
                records: rows + [try downloaded("f/pinned.bin", size: 6), try downloaded("f/before.bin", size: 51), moved, gone, populated])
            try check("downloads recorded")
            #expect(try store.summary(domainID: id).materialized == 104)
            #expect(try store.summary(domainID: id).pinned == 1)
            #expect(try store.summary(domainID: id).datalessFolders == 0)
            // Recorded again (a download of files already recorded): nothing changes.
            try store.recordDownloads(domainID: id, records: rows)
            try check("downloads recorded again")
            // Triggers are on again for every other write.
            try store.apply(domainID: id, upserts: [record(id, "f/after.bin", size: 1)], deletions: [ItemIdentifier("f/3.bin")])
            try check("writes afterwards")
        }
    }

    /// A database from before the counters gets them counted when it is opened.
    @Test func anOlderDatabaseIsCountedWhenOpened() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        let queue = try DatabaseQueue(path: url.path)
        try Migrations.migrator.migrate(queue, upTo: "v8: content policies, present ranges, last use, budgets")
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO domain (name, backendKind, configuration, replicaPath, createdAt)
                    VALUES ('old', 'local', '{}', '/r/old', '2026-01-02 03:04:05.000')
                    """)
            let rows: [(String, String, String, Int, String?, Bool)] = [
                ("", "folder", "folder", 0, nil, false), ("f", "folder", "folder", 0, "eager", true),
                ("f/a", "file", "materialized", 300, nil, false), ("f/b", "file", "placeholder", 5, "eager", false),
                ("f/c", "file", "materialized", 20, nil, false),
            ]
            for (path, kind, state, size, policy, dataless) in rows {
                try db.execute(
                    sql: """
                        INSERT INTO item (domainID, identifier, parentIdentifier, filename, path, kind, contentType, size,
                          contentVersion, metadataVersion, capabilities, state, contentPolicy, isDataless)
                        VALUES (1, ?, 'root', ?, ?, ?, 'public.data', ?, x'01', x'01', 0, ?, ?, ?)
                        """, arguments: [path.isEmpty ? "root" : path, path, path, kind, size, state, policy, dataless])
            }
        }
        try queue.close()
        let store = try MetadataStore(url: url)
        let summary = try store.summary(domainID: 1)
        #expect(summary == (try Self.counted(store, 1)))
        #expect(summary.materializedBytes == 320 && summary.pinned == 2 && summary.datalessFolders == 1 && summary.total == 4)
        #expect(try store.itemCount(domainID: 1) == 5)
    }
}
