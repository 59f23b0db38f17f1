import Foundation
import GRDB
import ProviderCore
import ProviderStore
import Testing

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
    /// Nothing reads a finished operation: its entry is deleted in the write that finishes it,
    /// not kept `done` until the end of the push.
    @Test func aFinishedEntryLeavesNoRow() throws {
        try withStore { store, folder in
            let id = try makeDomain(store)
            let opened = try store.openJournalEntries(
                ["create:a.txt", "create:b.txt", "modify:c"].map {
                    JournalEntry(domainID: id, templateIdentifier: $0, operation: "create", payload: "{}")
                })
            try store.save([record(id, "a.txt", size: 1)], finishing: [opened[0].entry])
            var done = opened[2].entry
            done.state = .done
            try store.updateJournal(done)
            let queue = try DatabaseQueue(path: folder.path("metadata.sqlite").path)
            let rows = try queue.read { db in try String.fetchAll(db, sql: "SELECT templateIdentifier FROM journal") }
            #expect(rows == ["create:b.txt"])
            // Opened again, the finished operations are new ones, not replays.
            let again = try store.openJournalEntries(
                ["create:a.txt", "create:b.txt"].map {
                    JournalEntry(domainID: id, templateIdentifier: $0, operation: "create", payload: "{}")
                })
            #expect(again.map(\.replay) == [false, true])
        }
    }

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
