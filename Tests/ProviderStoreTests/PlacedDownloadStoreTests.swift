import Foundation
import ProviderCore
import ProviderStore
import Testing

/// The notes of placed downloads (`placedDownload`), written and dropped 64 to a statement:
/// batches that fill a statement and a part of another, every value where it was bound.
@Suite struct PlacedDownloadStoreTests {
    func note(_ index: Int, inode: Int64, version: Data?) -> PlacedDownload {
        PlacedDownload(
            identifier: ItemIdentifier("f\(index)"), contentVersion: version, size: Int64(index), modificationNanos: Int64(index) * 7,
            inode: inode)
    }

    func noted(_ store: MetadataStore, _ domainID: Int64, _ index: Int, inode: Int64) throws -> PlacedDownload? {
        try store.placedDownload(
            domainID: domainID, identifier: ItemIdentifier("f\(index)"), size: Int64(index), modificationNanos: Int64(index) * 7,
            inode: inode)
    }

    @Test func notesOfABatchLongerThanAStatementAreEachWhereTheyWereWritten() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let versions: [Data?] = (0..<100).map { $0 == 5 ? nil : $0 == 6 ? Data() : Data("v\($0)".utf8) }
            try store.notePlacedDownloads(domainID: id, (0..<100).map { note($0, inode: 1000 + Int64($0), version: versions[$0]) })
            for index in 0..<100 {
                let found = try noted(store, id, index, inode: 1000 + Int64(index))
                #expect(found?.contentVersion == versions[index], "f\(index)")
            }
            #expect(try noted(store, id, 3, inode: 1004) == nil, "another inode is another file")
        }
    }

    /// An item's row that records a file drops the notes of its other downloads, not that
    /// file's, and nothing of other items.
    @Test func aWrittenRowDropsTheNotesOfItsEarlierDownloadsOnly() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            try store.notePlacedDownloads(domainID: id, (0..<100).map { note($0, inode: 1000 + Int64($0), version: Data([1])) })
            try store.notePlacedDownloads(domainID: id, (0..<70).map { note($0, inode: 2000 + Int64($0), version: Data([2])) })
            let rows = (0..<70).map { index in
                var row = record(id, "f\(index)", size: Int64(index))
                row.state = .materialized
                row.localInode = 2000 + Int64(index)
                return row
            }
            try store.save(rows, finishing: [])
            for index in 0..<100 {
                let earlier = try noted(store, id, index, inode: 1000 + Int64(index))
                #expect((earlier == nil) == (index < 70), "f\(index)'s first download")
                if index < 70 { #expect(try noted(store, id, index, inode: 2000 + Int64(index))?.contentVersion == Data([2])) }
            }
        }
    }
}
