import Foundation
import ProviderCore
import ProviderStore
import Testing

@Suite struct MigrationTests {
    static let expected = [
        "v1: domains, items, anchors, journal, checkpoints, thumbnails", "v2: conflicts, ignore patterns", "v3: domain backoff",
        "v4: dataless folders",
        "v5: journal by template", "v6: materialized and pinned items", "v7: replica modes",
        "v8: content policies, present ranges, last use, budgets", "v9: item counters", "v10: dataless folders index",
        "v11: counting paused for new rows",
        "v12: items excluded from sync", "v13: folder listings",
        "v14: staged records of a moved folder", "v15: policies indexed by value and on folders",
        "v16: uploads no listing has confirmed", "v17: file system flags", "v18: problems of the last sync",
        "v19: on-access mechanism", "v20: access rules", "v21: content hashes", "v22: mode reason",
        "v23: names indexed for search", "v24: names indexed on first search", "v25: downloads placed before their rows",
    ]

    @Test func migrationsApplyAndAreListedByName() throws {
        try withStore { store, _ in
            let applied = try store.appliedMigrations()
            #expect(applied == Self.expected)
        }
    }

    @Test func reopeningKeepsDataAndAppliesNothingTwice() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        do {
            let store = try MetadataStore(url: url)
            _ = try makeDomain(store, "kept")
        }
        let again = try MetadataStore(url: url)
        #expect(try again.appliedMigrations() == Self.expected)
        #expect(try again.domains().map(\.name) == ["kept"])
        #expect(try again.integrityCheck() == "ok")
    }

    @Test func createsMissingParentFolders() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let url = folder.path("a/b/c/metadata.sqlite")
        let store = try MetadataStore(url: url)
        #expect(FileManager.default.fileExists(atPath: url.path))
        #expect(try store.integrityCheck() == "ok")
    }

    @Test func unopenableFileIsLocalIOFailure() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        // A folder where the database file should be.
        let url = folder.path("metadata.sqlite")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        expectCode(.localIOFailure) { try MetadataStore(url: url) }
    }
}

@Suite struct DomainTableTests {
    @Test func insertAssignsIDAndRoundTrips() throws {
        try withStore { store, _ in
            let inserted = try store.insertDomain(
                DomainRecord(
                    name: "photos", backendKind: "local", configuration: ["root": "/srv/p", "page-size": "10"], replicaPath: "/r/photos"))
            let id = try #require(inserted.id)
            let fetched = try #require(try store.domain(named: "photos"))
            #expect(fetched.id == id)
            #expect(fetched.backendKind == "local")
            #expect(fetched.options == ["root": "/srv/p", "page-size": "10"])
            #expect(fetched.replicaPath == "/r/photos")
            #expect(fetched.isConnected)
            #expect(fetched.lastError == nil)
            #expect(try store.domain(named: "nope") == nil)
        }
    }

    /// Every column of a domain, written and read column by column (``DomainRecord/values``,
    /// ``DomainRecord/init(row:)``), comes back as it was, through an insert and an update.
    @Test func aDomainRoundTripsEveryField() throws {
        try withStore { store, _ in
            var domain = DomainRecord(
                name: "every", backendKind: "webdav", configuration: ["url": "http://127.0.0.1:1/dav"], replicaPath: "/r/every",
                createdAt: Date(timeIntervalSince1970: 1_765_000_000.125))
            domain.replicaMode = .dataless
            domain.hydration = .progressive
            domain.onAccess = .fuse
            domain.onAccessReason = "asked for"
            domain.modeReason = "the default"
            domain.cacheBudget = 1 << 40
            domain.ignorePatterns = "*.tmp\n~*"
            var inserted = try store.insertDomain(domain)
            #expect(inserted.id != nil)
            #expect(try store.domain(named: "every") == inserted)
            inserted.isConnected = false
            inserted.lastSyncAt = Date(timeIntervalSince1970: 1_765_000_100.5)
            inserted.lastError = "unreachable"
            inserted.failureCount = 3
            inserted.nextRetryAt = Date(timeIntervalSince1970: 1_765_000_200.75)
            try store.updateDomain(inserted)
            #expect(try store.domains() == [inserted])
            let id = try #require(inserted.id)
            let failed = try #require(
                try store.recordDomainFailure(id: id, message: "again", nextRetry: { _ in Date(timeIntervalSince1970: 1_765_000_300) }))
            #expect(failed.failureCount == 4)
            #expect(try store.domain(named: "every")?.nextRetryAt == Date(timeIntervalSince1970: 1_765_000_300))
        }
    }

    @Test func duplicateNameIsFilenameCollision() throws {
        try withStore { store, _ in
            _ = try makeDomain(store, "same")
            expectCode(.filenameCollision) { try makeDomain(store, "same") }
            #expect(try store.domains().count == 1)
        }
    }

    @Test func domainsAreListedByNameAndUpdated() throws {
        try withStore { store, _ in
            for name in ["zeta", "alpha", "mid"] { _ = try makeDomain(store, name) }
            #expect(try store.domains().map(\.name) == ["alpha", "mid", "zeta"])
            var mid = try #require(try store.domain(named: "mid"))
            mid.lastError = "unreachable"
            mid.isConnected = false
            mid.lastSyncAt = Date(timeIntervalSince1970: 1_700_000_000)
            try store.updateDomain(mid)
            let fetched = try #require(try store.domain(named: "mid"))
            #expect(fetched.lastError == "unreachable")
            #expect(!fetched.isConnected)
            #expect(fetched.lastSyncAt == Date(timeIntervalSince1970: 1_700_000_000))
        }
    }
}

@Suite struct ItemTableTests {
    /// root, a/, a/x, a/sub/, a/sub/y, a-b/, a-b/z, a0, a.txt, b
    static let paths: [(String, Bool)] = [
        ("", true), ("a", true), ("a/x", false), ("a/sub", true), ("a/sub/y", false), ("a-b", true),
        ("a-b/z", false), ("a0", false), ("a.txt", false), ("b", false),
    ]

    func fill(_ store: MetadataStore, _ domainID: Int64) throws {
        try store.apply(
            domainID: domainID, upserts: Self.paths.map { record(domainID, $0.0, folder: $0.1, size: 3) }, deletions: [])
    }

    @Test func applyAndFetchByIdentifierAndPath() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let x = try #require(try store.item(domainID: id, identifier: "a/x"))
            #expect(x.path == "a/x")
            #expect(x.filename == "x")
            #expect(x.parentIdentifier == "a")
            #expect(x.state == .placeholder)
            #expect(x.size == 3)
            #expect(x.version == ItemVersion(content: Data([1]), metadata: Data([1, 0xee])))
            #expect(x.modificationDate == Date(timeIntervalSince1970: 1_700_000_000))
            #expect(try store.item(domainID: id, path: "a/sub/y")?.identifier == "a/sub/y")
            #expect(try store.item(domainID: id, path: "")?.identifier == .rootContainer)
            #expect(try store.item(domainID: id, path: "a/nothing") == nil)
            #expect(try store.item(domainID: id, identifier: "nothing") == nil)
            #expect(try store.allItems(domainID: id).count == Self.paths.count)
        }
    }

    @Test func recordRoundTripsEveryField() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var full = record(id, "f.bin", size: 42, version: 7)
            full.state = .materialized
            full.isPinned = true
            full.localContentVersion = Data([7])
            full.localSize = 42
            full.localModificationNanos = 1_700_000_000_123_456_789
            full.localInode = 99
            full.lastError = "boom"
            full.contentHash = "sha256:00"
            full.creationDate = Date(timeIntervalSince1970: 1_600_000_000.5)
            try store.save(full)
            #expect(try store.item(domainID: id, identifier: "f.bin") == full)
            var link = ItemRecord(
                domainID: id,
                item: Item(
                    identifier: "l", parentIdentifier: .rootContainer, filename: "l", kind: .symlink, size: 4, symlinkTargetPath: "../t"),
                path: "l")
            link.lastError = nil
            try store.save(link)
            let fetched = try #require(try store.item(domainID: id, path: "l"))
            #expect(fetched.state == .symlink)
            #expect(fetched.symlinkTarget == "../t")
            #expect(fetched.contentType == ContentType.symlink)
        }
    }

    @Test func childrenAreSortedByName() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let names = try store.children(domainID: id, parent: .rootContainer).filter { !$0.path.isEmpty }.map(\.filename)
            #expect(names == ["a", "a-b", "a.txt", "a0", "b"])
        }
    }

    /// The root's parent is the root itself (as in Apple's model), so a query by parent must
    /// leave the root out, or `ls DOMAIN:` shows the root as an entry of itself.
    @Test func childrenOfTheRootDoNotIncludeTheRoot() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let children = try store.children(domainID: id, parent: .rootContainer)
            #expect(!children.contains { $0.path.isEmpty }, "the root is listed as its own child")
            #expect(children.map(\.filename) == ["a", "a-b", "a.txt", "a0", "b"])
        }
    }

    @Test func childrenOfSubfoldersAreSortedByName() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            #expect(try store.children(domainID: id, parent: "a").map(\.filename) == ["sub", "x"])
            #expect(try store.children(domainID: id, parent: "a/x").isEmpty)
        }
    }

    @Test func descendantsOfAFolderExcludeSiblingsWithTheSamePrefix() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            // "a-b", "a.txt" and "a0" sort right around "a/" but are not inside "a".
            #expect(try store.descendants(domainID: id, of: "a").map(\.path) == ["a/sub", "a/sub/y", "a/x"])
            #expect(try store.descendants(domainID: id, of: "a/sub").map(\.path) == ["a/sub/y"])
            #expect(try store.descendants(domainID: id, of: "a-b").map(\.path) == ["a-b/z"])
            #expect(try store.descendants(domainID: id, of: "b").isEmpty)
            #expect(try store.descendants(domainID: id, of: "missing").isEmpty)
        }
    }

    @Test func descendantsOfTheRootAreEverythingButTheRoot() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            let other = try makeDomain(store, "other")
            try store.save(record(other, "a/other-domain"))
            let all = try store.descendants(domainID: id, of: "")
            #expect(all.map(\.path) == Self.paths.map(\.0).filter { !$0.isEmpty }.sorted())
            #expect(!all.contains { $0.identifier == .rootContainer })
        }
    }

    /// The local scan reads one folder at a time by path: the direct children only, whatever
    /// lies below them or sorts right around the folder's name, and never another domain's.
    @Test func childrenByPathAreTheDirectChildrenOnly() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            try store.save(record(id, "a/sub/deeper", folder: true))
            try store.save(record(id, "a/sub/deeper/z", size: 1))
            try store.save(record(id, "a/sub0"))
            let other = try makeDomain(store, "other")
            try store.save(record(other, "a/other-domain"))
            try store.save(record(other, "c"))
            #expect(try store.children(domainID: id, inFolderAt: "").map(\.path) == ["a", "a-b", "a.txt", "a0", "b"])
            #expect(try store.children(domainID: id, inFolderAt: "a").map(\.path) == ["a/sub", "a/sub0", "a/x"])
            #expect(try store.children(domainID: id, inFolderAt: "a/sub").map(\.path) == ["a/sub/deeper", "a/sub/y"])
            #expect(try store.children(domainID: id, inFolderAt: "a-b").map(\.path) == ["a-b/z"])
            #expect(try store.children(domainID: id, inFolderAt: "b").isEmpty)
            #expect(try store.children(domainID: id, inFolderAt: "missing").isEmpty)
            var below: [String] = []
            try store.forEachDescendant(domainID: id, of: "a/sub") { below.append($0.path) }
            #expect(below == ["a/sub/deeper", "a/sub/deeper/z", "a/sub/y"])
            // In pages (the FUSE mount's listings of dataless folders): every child once, in
            // path order, whatever lies below a subfolder between two pages.
            for folder in ["", "a", "a/sub", "b"] {
                var paged: [String] = []
                var after: String?
                while true {
                    let page = try store.children(domainID: id, inFolderAt: folder, after: after, limit: 2)
                    paged += page.map(\.path)
                    guard page.count == 2, let last = page.last else { break }
                    after = last.path
                }
                #expect(paged == (try store.children(domainID: id, inFolderAt: folder).map(\.path)), "\(folder)")
            }
            #expect(try store.children(domainID: id, inFolderAt: "", after: "a", limit: 1).map(\.path) == ["a-b"])
        }
    }

    @Test func applyDeletesThenUpserts() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            // A path-derived rename: the old identifier goes, a new one takes the same path slot
            // in the same transaction.
            var renamed = record(id, "b", size: 9, version: 2)
            renamed.identifier = "b-new-id"
            try store.apply(domainID: id, upserts: [renamed], deletions: ["b", "a0"])
            #expect(try store.item(domainID: id, identifier: "b") == nil)
            #expect(try store.item(domainID: id, identifier: "a0") == nil)
            #expect(try store.item(domainID: id, path: "b")?.identifier == "b-new-id")
            #expect(try store.item(domainID: id, path: "b")?.size == 9)
            // Upserting an existing identifier replaces it.
            var x = try #require(try store.item(domainID: id, identifier: "a/x"))
            x.state = .materialized
            try store.save(x)
            #expect(try store.item(domainID: id, identifier: "a/x")?.state == .materialized)
            #expect(try store.allItems(domainID: id).count == Self.paths.count - 1)
        }
    }

    @Test func itemsOfDomainsAreSeparate() throws {
        try withStore { store, _ in
            let one = try makeDomain(store, "one")
            let two = try makeDomain(store, "two")
            try store.save(record(one, "f"))
            try store.save(record(two, "f", size: 5))
            #expect(try store.item(domainID: one, path: "f")?.size == 0)
            #expect(try store.item(domainID: two, path: "f")?.size == 5)
            #expect(try store.children(domainID: one, parent: .rootContainer).count == 1)
        }
    }

    @Test func summaryCountsByStateWithoutTheRoot() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try fill(store, id)
            var x = try #require(try store.item(domainID: id, identifier: "a/x"))
            x.state = .materialized
            x.isPinned = true
            var y = try #require(try store.item(domainID: id, identifier: "a/sub/y"))
            y.state = .materialized
            var a = try #require(try store.item(domainID: id, identifier: "a"))
            a.isPinned = true
            let link = ItemRecord(
                domainID: id, item: Item(identifier: "l", parentIdentifier: .rootContainer, filename: "l", kind: .symlink),
                path: "l")
            try store.apply(domainID: id, upserts: [x, y, a, link], deletions: [])
            let summary = try store.summary(domainID: id)
            #expect(summary.folders == 3)  // a, a/sub, a-b; not the root
            #expect(summary.placeholders == 4)  // a-b/z, a0, a.txt, b
            #expect(summary.materialized == 2)
            #expect(summary.materializedBytes == 6)
            #expect(summary.symlinks == 1)
            #expect(summary.pinned == 2)
            #expect(summary.total == 10)
            let empty = try makeDomain(store, "empty")
            #expect(try store.summary(domainID: empty) == ItemSummary())
        }
    }
}

@Suite struct JournalAnchorCheckpointThumbnailTests {
    @Test func syncAnchorsPerContainer() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            #expect(try store.syncAnchor(domainID: id, container: .workingSet) == nil)
            try store.setSyncAnchor(SyncAnchor(Data([1, 2])), domainID: id, container: .workingSet)
            try store.setSyncAnchor(SyncAnchor(Data([3])), domainID: id, container: "a")
            try store.setSyncAnchor(SyncAnchor(Data([4, 5, 6])), domainID: id, container: .workingSet)
            #expect(try store.syncAnchor(domainID: id, container: .workingSet) == SyncAnchor(Data([4, 5, 6])))
            #expect(try store.syncAnchor(domainID: id, container: "a") == SyncAnchor(Data([3])))
            try store.setSyncAnchor(nil, domainID: id, container: "a")
            #expect(try store.syncAnchor(domainID: id, container: "a") == nil)
        }
    }

    @Test func journalEntriesRoundTripAndUnfinishedOperations() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let other = try makeDomain(store, "other")
            let created = Date(timeIntervalSince1970: 1_700_000_000)
            let first = try store.journal(
                JournalEntry(domainID: id, templateIdentifier: "tmp-1", operation: "create", payload: #"{"name":"a"}"#, now: created))
            var second = try store.journal(JournalEntry(domainID: id, templateIdentifier: "tmp-2", operation: "modify", payload: "{}"))
            var third = try store.journal(JournalEntry(domainID: id, templateIdentifier: "tmp-3", operation: "delete", payload: "{}"))
            _ = try store.journal(JournalEntry(domainID: other, templateIdentifier: "x", operation: "create", payload: "{}"))
            let firstID = try #require(first.id)
            #expect(second.id.map { $0 > firstID } == true)

            var unfinished = try store.unfinishedOperations(domainID: id)
            #expect(unfinished.map(\.templateIdentifier) == ["tmp-1", "tmp-2", "tmp-3"])
            #expect(unfinished[0] == first)
            #expect(unfinished[0].payload == #"{"name":"a"}"#)
            #expect(unfinished[0].state == .pending)
            #expect(unfinished[0].createdAt == created)

            second.state = .done
            try store.updateJournal(second)
            third.state = .failed
            third.attempts = 3
            third.lastError = "serverUnreachable"
            third.nextAttemptAt = Date(timeIntervalSince1970: 1_800_000_000)
            try store.updateJournal(third)
            unfinished = try store.unfinishedOperations(domainID: id)
            #expect(unfinished.map(\.templateIdentifier) == ["tmp-1", "tmp-3"])
            let failed = unfinished[1]
            #expect(failed.state == .failed)
            #expect(failed.attempts == 3)
            #expect(failed.lastError == "serverUnreachable")
            #expect(failed.nextAttemptAt == Date(timeIntervalSince1970: 1_800_000_000))
            #expect(failed.updatedAt >= failed.createdAt)

            try store.pruneJournal(domainID: id)
            #expect(try store.unfinishedOperations(domainID: id).count == 2)
            #expect(try store.unfinishedOperations(domainID: other).count == 1)
        }
    }

    /// A journal entry of a create written with `state` and `attempts`.
    func openEntry(_ store: MetadataStore, _ id: Int64, _ template: String, state: JournalState, attempts: Int) throws -> JournalEntry {
        var entry = try store.journal(JournalEntry(domainID: id, templateIdentifier: template, operation: "create", payload: "{}"))
        entry.state = state
        entry.attempts = attempts
        try store.updateJournal(entry)
        return entry
    }

    @Test func savingAnOperationsResultClosesItsEntryInTheSameWrite() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let entry = try openEntry(store, id, "create:a.txt", state: .running, attempts: 1)
            try store.save(record(id, "a.txt", size: 3), finishing: entry)
            #expect(try store.item(domainID: id, path: "a.txt")?.size == 3)
            #expect(try store.unfinishedOperations(domainID: id).isEmpty)
            #expect(try store.unfinishedOperation(domainID: id, templateIdentifier: "create:a.txt") == nil)

            // A record that cannot be written leaves the entry open: the operation is replayed.
            let second = try store.journal(
                JournalEntry(domainID: id, templateIdentifier: "create:b.txt", operation: "create", payload: "{}"))
            var clash = record(id, "b.txt")
            clash.domainID = 9_999  // no such domain: the foreign key refuses the row
            #expect(throws: FileProviderError.self) { try store.save(clash, finishing: second) }
            #expect(try store.unfinishedOperations(domainID: id).map(\.templateIdentifier) == ["create:b.txt"])
        }
    }

    /// New items are checked in the write that records them: one whose identifier another item
    /// holds is not written and its entry stays open; the others of the write are recorded.
    @Test func savingNewItemsRefusesOneWhoseIdentifierAnotherItemHolds() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try store.save(record(id, "b.txt", size: 7))
            let entries = try ["create:a.txt", "create:c.txt", "modify:b.txt"].map {
                try openEntry(store, id, $0, state: .running, attempts: 1)
            }
            var lying = record(id, "a.txt", size: 1)
            lying.identifier = ItemIdentifier("b.txt")  // the store answered a.txt's creation with b.txt's identifier
            var edited = record(id, "b.txt", size: 8)
            edited.identifier = ItemIdentifier("b.txt")
            let refused = try store.save(
                [lying, record(id, "c.txt", size: 3), edited], finishing: entries, checkingNew: [true, true, false],
                refusal: { new, holder in "\(new.path) answered with \(holder.path)'s identifier" })
            #expect(refused.map(\.record.path) == ["a.txt"] && refused.map(\.holder.path) == ["b.txt"])
            #expect(try store.item(domainID: id, path: "a.txt") == nil)
            #expect(try store.item(domainID: id, path: "b.txt")?.size == 8, "an item that is not new is written as it is")
            #expect(try store.item(domainID: id, path: "c.txt")?.size == 3)
            let left = try store.unfinishedOperations(domainID: id)
            #expect(left.map(\.templateIdentifier) == ["create:a.txt"])
            #expect(left.first?.state == .pending && left.first?.lastError == "a.txt answered with b.txt's identifier")
        }
    }

    @Test func openingEntriesTakesUnfinishedOnesAsReplaysAndWithdrawingGivesThemBack() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let earlier = try openEntry(store, id, "create:a.txt", state: .pending, attempts: 2)
            let opened = try store.openJournalEntries(
                ["create:a.txt", "create:b.txt", "modify:c"].map {
                    JournalEntry(domainID: id, templateIdentifier: $0, operation: "create", payload: "{}")
                })
            #expect(opened.map(\.replay) == [true, false, false])
            #expect(opened[0].entry.id == earlier.id)
            #expect(opened.map(\.entry.attempts) == [3, 1, 1])
            #expect(opened.allSatisfy { $0.entry.state == .running && $0.entry.id != nil })
            #expect(try store.unfinishedOperations(domainID: id).map(\.state) == [.running, .running, .running])

            // Two of them ran and are recorded in one write; the other two are given back.
            try store.save([record(id, "b.txt", size: 1), record(id, "d.txt", size: 2)], finishing: [opened[1].entry])
            #expect(try store.item(domainID: id, path: "d.txt")?.size == 2)
            try store.withdrawJournalEntries([opened[0], opened[2]])
            let left = try store.unfinishedOperations(domainID: id)
            #expect(left.map(\.templateIdentifier) == ["create:a.txt"], "a new entry that never ran is removed")
            #expect(left.first?.state == .pending)
            #expect(left.first?.attempts == 2, "an attempt that never ran is not counted")
        }
    }

    /// A moved folder's records are replaced in one transaction: when the new ones cannot be
    /// written, the old ones stay (two writes left the folder's items unrecorded after a kill in
    /// between, and the next scan uploaded them again beside themselves).
    @Test func replacingASubtreeIsAllOrNothing() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try store.apply(domainID: id, upserts: [record(id, "d"), record(id, "d/a.txt"), record(id, "d/b.txt")], deletions: [])
            var broken = record(id, "e/a.txt")
            broken.domainID = 9_999  // no such domain: the foreign key refuses the row
            #expect(throws: FileProviderError.self) {
                try store.replaceSubtree(domainID: id, path: "d", with: [record(id, "e"), broken])
            }
            #expect(try store.descendants(domainID: id, of: "d").map(\.path).sorted() == ["d/a.txt", "d/b.txt"])
            try store.replaceSubtree(domainID: id, path: "d", with: [record(id, "e"), record(id, "e/a.txt")])
            #expect(try store.item(domainID: id, path: "d") == nil)
            #expect(try store.descendants(domainID: id, of: "e").map(\.path) == ["e/a.txt"])
        }
    }

    @Test func anEntryTheStoreRefusedIsReopenedAsAFreshAttemptNotAReplay() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let refused = try openEntry(store, id, "create:a.txt", state: .failed, attempts: 1)
            let opened = try store.openJournalEntries([
                JournalEntry(domainID: id, templateIdentifier: "create:a.txt", operation: "create", payload: "{}")
            ])
            #expect(opened.map(\.replay) == [false], "nothing was done by a refused attempt: no mayAlreadyExist")
            #expect(opened[0].entry.id == refused.id)
            #expect(opened[0].entry.attempts == 2)
            // Given back without running: still the refused entry, not a replay, not removed.
            try store.withdrawJournalEntries(opened)
            let left = try store.unfinishedOperations(domainID: id)
            #expect(left.map(\.state) == [.failed])
            #expect(left.first?.attempts == 1)
        }
    }

    @Test func checkpointsSaveFetchRemove() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let checkpoint = TransferCheckpoint(
                domainID: id, identifier: "big.bin", contentVersion: Data([9]), stagingPath: "/s/abc.part",
                bytesTransferred: 1000, totalBytes: 4000, updatedAt: Date(timeIntervalSince1970: 1_700_000_000))
            try store.saveCheckpoint(checkpoint)
            #expect(try store.checkpoint(domainID: id, identifier: "big.bin") == checkpoint)
            var later = checkpoint
            later.bytesTransferred = 3000
            try store.saveCheckpoint(later)
            #expect(try store.checkpoint(domainID: id, identifier: "big.bin")?.bytesTransferred == 3000)
            try store.saveCheckpoint(
                TransferCheckpoint(
                    domainID: id, identifier: "other", contentVersion: Data(), stagingPath: "/s/o", bytesTransferred: 1, totalBytes: nil))
            let all = try store.checkpoints(domainID: id)
            #expect(Set(all.keys) == ["big.bin", "other"])
            #expect(all["other"]?.totalBytes == nil)
            try store.removeCheckpoint(domainID: id, identifier: "big.bin")
            #expect(try store.checkpoint(domainID: id, identifier: "big.bin") == nil)
            #expect(try store.checkpoints(domainID: id).count == 1)
        }
    }

    @Test func thumbnailsAreKeyedByContentVersion() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let v1 = Data([1])
            let v2 = Data([2])
            try store.saveThumbnail(
                ThumbnailRecord(domainID: id, identifier: "p.jpg", contentVersion: v1, size: 128, data: Data("one".utf8)))
            try store.saveThumbnail(
                ThumbnailRecord(domainID: id, identifier: "p.jpg", contentVersion: v1, size: 256, data: Data("big".utf8)))
            #expect(try store.thumbnail(domainID: id, identifier: "p.jpg", contentVersion: v1, size: 128) == Data("one".utf8))
            #expect(try store.thumbnail(domainID: id, identifier: "p.jpg", contentVersion: v1, size: 256) == Data("big".utf8))
            // A newer content version does not get the old picture.
            #expect(try store.thumbnail(domainID: id, identifier: "p.jpg", contentVersion: v2, size: 128) == nil)
            #expect(try store.thumbnail(domainID: id, identifier: "p.jpg", contentVersion: v1, size: 64) == nil)
            // Saving the new version replaces the old one.
            try store.saveThumbnail(
                ThumbnailRecord(domainID: id, identifier: "p.jpg", contentVersion: v2, size: 128, data: Data("two".utf8)))
            #expect(try store.thumbnail(domainID: id, identifier: "p.jpg", contentVersion: v2, size: 128) == Data("two".utf8))
            #expect(try store.thumbnail(domainID: id, identifier: "p.jpg", contentVersion: v1, size: 128) == nil)
        }
    }

    @Test func deletingADomainCascadesEverything() throws {
        try withStore { store, _ in
            let gone = try makeDomain(store, "gone")
            let kept = try makeDomain(store, "kept")
            for id in [gone, kept] {
                try store.apply(
                    domainID: id, upserts: [record(id, "", folder: true), record(id, "f"), record(id, "d", folder: true)], deletions: [])
                try store.setSyncAnchor(SyncAnchor(Data([1])), domainID: id, container: .workingSet)
                _ = try store.journal(JournalEntry(domainID: id, templateIdentifier: "t", operation: "create", payload: "{}"))
                try store.saveCheckpoint(
                    TransferCheckpoint(
                        domainID: id, identifier: "f", contentVersion: Data([1]), stagingPath: "/s", bytesTransferred: 1, totalBytes: 2))
                try store.saveThumbnail(
                    ThumbnailRecord(domainID: id, identifier: "f", contentVersion: Data([1]), size: 64, data: Data([0xff])))
            }
            try store.deleteDomain(id: gone)

            #expect(try store.domain(named: "gone") == nil)
            #expect(try store.allItems(domainID: gone).isEmpty)
            #expect(try store.syncAnchor(domainID: gone, container: .workingSet) == nil)
            #expect(try store.unfinishedOperations(domainID: gone).isEmpty)
            #expect(try store.checkpoints(domainID: gone).isEmpty)
            #expect(try store.thumbnail(domainID: gone, identifier: "f", contentVersion: Data([1]), size: 64) == nil)

            #expect(try store.allItems(domainID: kept).count == 3)
            #expect(try store.syncAnchor(domainID: kept, container: .workingSet) != nil)
            #expect(try store.unfinishedOperations(domainID: kept).count == 1)
            #expect(try store.checkpoints(domainID: kept).count == 1)
            #expect(try store.thumbnail(domainID: kept, identifier: "f", contentVersion: Data([1]), size: 64) == Data([0xff]))
            #expect(try store.integrityCheck() == "ok")
        }
    }

    @Test func integrityCheckIsOK() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try store.apply(domainID: id, upserts: (0..<500).map { record(id, "f\($0)") }, deletions: [])
            try store.apply(domainID: id, upserts: [], deletions: (0..<250).map { ItemIdentifier("f\($0)") })
            #expect(try store.integrityCheck() == "ok")
        }
    }
}
