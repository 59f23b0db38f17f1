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
