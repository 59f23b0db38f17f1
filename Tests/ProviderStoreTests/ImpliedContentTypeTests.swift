import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

@Suite struct ImpliedContentTypeTests {
    /// A row whose content type is its kind's own (`public.data` for a file, `public.folder`,
    /// `public.symlink`) stores `''` and reads back with that type; any other type, even a
    /// folder's on a file, is stored as given. Both ways of writing rows (a first sync's insert
    /// of fresh rows, and an upsert of rows with local columns) and a rewrite of a row.
    @Test func aKindsOwnTypeIsLeftOutOfTheRowAndReadBack() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            var link = record(id, "link")
            link.kind = .symlink
            link.state = .symlink
            link.contentType = ContentType.symlink
            link.symlinkTarget = "a.bin"
            var odd = record(id, "odd")
            odd.contentType = ContentType.folder
            let fresh = [record(id, "a.bin"), record(id, "f", folder: true), record(id, "b.jpg"), link, odd]
            #expect(fresh[2].contentType == "public.jpeg")
            try store.insertNew(domainID: id, records: fresh)

            var downloaded = record(id, "c.bin")
            downloaded.state = .materialized
            downloaded.localContentVersion = Data([1])
            downloaded.localSize = 0
            var typed = record(id, "d.bin")
            typed.contentType = "com.example.custom"
            try store.apply(domainID: id, upserts: [downloaded, typed], deletions: [])

            var retyped = fresh[0]
            retyped.contentType = "public.plain-text"
            var untyped = fresh[2]
            untyped.contentType = ContentType.data
            try store.apply(domainID: id, upserts: [retyped, untyped], deletions: [])

            let expected = [retyped, fresh[1], untyped, link, odd, downloaded, typed]
            for row in expected {
                #expect(try store.item(domainID: id, path: row.path) == row, "\(row.path)")
            }
            let stored = try store.read { db in
                try Row.fetchAll(db, sql: "SELECT path, contentType FROM item WHERE domainID = ? AND path <> ''", arguments: [id])
                    .reduce(into: [String: String]()) { $0[$1[0]] = $1[1] }
            }
            #expect(
                stored == [
                    "a.bin": "public.plain-text", "f": "", "b.jpg": "", "link": "", "odd": "public.folder", "c.bin": "",
                    "d.bin": "com.example.custom",
                ])
        }
    }
}
