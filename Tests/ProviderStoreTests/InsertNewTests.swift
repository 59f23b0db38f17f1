import Foundation
import ProviderCore
import Testing

@testable import ProviderStore

@Suite struct InsertNewTests {
    /// A batch of new rows with nothing in the local columns (a first sync's) is inserted
    /// binding only the columns such a row has; a batch with any other row, binding all. Either
    /// way every column reads back as written, in statements of 32 rows and single ones.
    @Test func newRowsReadBackAsWrittenFreshOrNot() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            func row(_ path: String, _ index: Int) -> ItemRecord {
                var row = record(id, path, size: Int64(index))
                row.creationDate = Date(timeIntervalSince1970: 1_600_000_000 + Double(index))
                row.contentHash = "sha1:\(index)"
                if index.isMultiple(of: 3) {
                    row.fileSystemFlags = FileSystemFlags.plainFile.union(.userExecutable).rawValue
                }
                if index.isMultiple(of: 5) {
                    row.kind = .symlink
                    row.state = .symlink
                    row.symlinkTarget = "target \(index)"
                }
                if index.isMultiple(of: 7) {
                    row.kind = .folder
                    row.state = .folder
                    row.size = 0
                    row.isDataless = true
                }
                return row
            }
            let fresh = (0..<70).map { row("a/\($0)", $0) }
            #expect(fresh.allSatisfy { $0.isFresh })
            try store.insertNew(domainID: id, records: fresh)
            var mixed = (0..<40).map { row("b/\($0)", $0) }
            mixed[3].localInode = 42
            mixed[4].contentPolicy = .eager
            mixed[6].lastError = "failed"
            mixed[8].state = .materialized
            mixed[8].localContentVersion = Data([9])
            mixed[8].localSize = 8
            mixed[8].localModificationNanos = 1_700_000_000_000_000_000
            #expect(!mixed.allSatisfy { $0.isFresh })
            try store.insertNew(domainID: id, records: mixed)
            for written in fresh + mixed {
                #expect(try store.item(domainID: id, path: written.path) == written, "\(written.path)")
            }
            #expect(try store.itemCount(domainID: id) == fresh.count + mixed.count)
        }
    }

    /// The inserts of a batch of new rows stop at a row that breaks a constraint and keep the
    /// rows before it in their statement (`INSERT OR FAIL`, no statement journal): a batch whose
    /// row in the middle of a 32-row statement is there already (its identifier, or another
    /// identifier at its path) is written as `apply` writes it, each row once, the row that was
    /// there replaced, and the counters say what a count of the rows says.
    @Test func aRowThereAlreadyInTheMiddleOfAStatementLeavesNoHalfBatch() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try store.insertNew(domainID: id, records: [record(id, "", folder: true), record(id, "f", folder: true)])
            try store.insertNew(domainID: id, records: [record(id, "f/10.bin", size: 1), record(id, "f/60.bin", size: 1)])
            // Rows 0...63 in two statements of 32: f/10.bin is the eleventh row of the first,
            // and the second has another identifier at the path of f/60.bin.
            var batch = (0..<64).map { record(id, "f/\($0).bin", size: 3) }
            batch[10].size = 9
            batch[60].identifier = ItemIdentifier("other-60")
            try store.insertNew(domainID: id, records: batch)
            let rows = try store.descendants(domainID: id, of: "f")
            #expect(rows.count == 64)
            #expect(Set(rows.map(\.path)).count == 64)
            #expect(try store.item(domainID: id, path: "f/10.bin")?.size == 9)
            #expect(try store.item(domainID: id, path: "f/60.bin")?.identifier == ItemIdentifier("other-60"))
            #expect(try store.item(domainID: id, identifier: ItemIdentifier("f/60.bin")) == nil)
            try ItemCountTests.expectCounted(store, [id], after: "a batch with rows there already")
        }
    }

    /// A batch of new rows goes in without a foreign key check per row, its domain checked once:
    /// a batch for a domain removed meanwhile (while its first sync ran) is refused as a checked
    /// insert refuses it and writes nothing, and the connection checks foreign keys again for
    /// the writes after it.
    @Test func aBatchForARemovedDomainIsRefusedAndChecksStayOn() throws {
        try withStore { store, _ in
            let kept = try makeDomain(store, "kept")
            let gone = try makeDomain(store, "gone")
            try store.deleteDomain(id: gone)
            expectCode(.localIOFailure) {
                try store.insertNew(domainID: gone, records: (0..<40).map { record(gone, "f/\($0)") })
            }
            #expect(try store.item(domainID: gone, path: "f/0") == nil)
            #expect(try store.item(domainID: gone, path: "f/39") == nil)
            try store.insertNew(domainID: kept, records: (0..<40).map { record(kept, "f/\($0)") })
            #expect(try store.itemCount(domainID: kept) == 40)
            expectCode(.localIOFailure) { try store.save(record(gone, "after")) }
            #expect(try store.item(domainID: gone, path: "after") == nil)
        }
    }
}
