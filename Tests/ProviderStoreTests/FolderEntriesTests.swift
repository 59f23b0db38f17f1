import Foundation
import ProviderCore
import ProviderStore
import Testing

/// ``MetadataStore/folderEntries(domainID:inFolderAt:after:limit:into:)``: the FUSE layout's
/// listings of dataless folders, read column by column into one reused page.
@Suite struct FolderEntriesTests {
    /// Every page of `folder`, `limit` entries at a time, as (name, entry) pairs.
    func paged(_ store: MetadataStore, _ id: Int64, _ folder: String, limit: Int) throws -> [(String, FolderEntryPage.Entry)] {
        var page = FolderEntryPage()
        var all: [(String, FolderEntryPage.Entry)] = []
        var after: [UInt8]?
        while true {
            try store.folderEntries(domainID: id, inFolderAt: Array(folder.utf8), after: after, limit: limit, into: &page)
            all += page.entries.map { (String(decoding: page.name(of: $0), as: UTF8.self), $0) }
            if page.isLast { return all }
            guard let last = page.entries.last else { return all }
            after = page.name(of: last)
        }
    }

    /// The same children as ``MetadataStore/children(domainID:inFolderAt:)``, in the same
    /// order, with their columns, whatever the page size and whatever lies below subfolders.
    @Test func entriesAreTheChildrenWithTheirColumns() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var rows = [
                record(id, "", folder: true), record(id, "a", folder: true), record(id, "a/x", size: 7), record(id, "a/sub", folder: true),
                record(id, "a/sub/deeper", folder: true), record(id, "a/sub/deeper/z", size: 1), record(id, "a/sub/y", size: 2),
                record(id, "a/sub0", size: 3), record(id, "a-b", folder: true), record(id, "a-b/z"), record(id, "a0", size: 5),
                record(id, "b", size: 9),
            ]
            rows[3].isDataless = true
            var link = ItemRecord(
                domainID: id,
                item: Item(identifier: "a/l", parentIdentifier: "a", filename: "l", kind: .symlink, size: 4, symlinkTargetPath: "../tt"),
                path: "a/l")
            link.modificationDate = nil
            link.creationDate = Date(timeIntervalSince1970: 1_600_000_000.25)
            rows.append(link)
            try store.apply(domainID: id, upserts: rows, deletions: [])
            let other = try makeDomain(store, "other")
            try store.save(record(other, "a/other-domain"))
            for folder in ["", "a", "a/sub", "a-b", "b", "missing"] {
                let expected = try store.children(domainID: id, inFolderAt: folder)
                for limit in [1, 2, 512] {
                    let entries = try paged(store, id, folder, limit: limit)
                    #expect(entries.map(\.0) == expected.map(\.filename), "\(folder), pages of \(limit)")
                    for ((_, entry), record) in zip(entries, expected) {
                        #expect(entry.kind == record.kind, "\(record.path)")
                        #expect(entry.size == record.size, "\(record.path)")
                        #expect(entry.isDataless == record.isDataless, "\(record.path)")
                        #expect(entry.fileSystemFlags == record.fileSystemFlags, "\(record.path)")
                        #expect(entry.symlinkTargetLength == (record.symlinkTarget?.utf8.count ?? 0), "\(record.path)")
                        let date = try #require(record.modificationDate ?? record.creationDate)
                        #expect(entry.modificationSeconds == date.timeIntervalSince1970, "\(record.path)")
                    }
                }
            }
            // From a name on: strictly after it.
            var page = FolderEntryPage()
            try store.folderEntries(domainID: id, inFolderAt: [], after: Array("a".utf8), limit: 1, into: &page)
            #expect(page.entries.map { String(decoding: page.name(of: $0), as: UTF8.self) } == ["a-b"])
            #expect(!page.isLast)
        }
    }

    /// Rows no sync would write are checked as they are read: a name no folder can hold is
    /// left out, a negative size reads 0.
    @Test func hostileRowsAreCheckedWhereTheyEnter() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let long = String(repeating: "n", count: 256)
            var negative = record(id, "f/negative", size: 1)
            negative.size = -5
            try store.apply(
                domainID: id,
                upserts: [record(id, "f", folder: true), record(id, "f/\(long)", size: 1), negative, record(id, "f/ok", size: 1)],
                deletions: [])
            let entries = try paged(store, id, "f", limit: 512)
            #expect(entries.map(\.0) == ["negative", "ok"])
            #expect(entries.first?.1.size == 0)
        }
    }
}
