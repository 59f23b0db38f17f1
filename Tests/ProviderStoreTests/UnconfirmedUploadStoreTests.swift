import Foundation
import ProviderCore
import ProviderStore
import Testing

/// The files the store took, unconfirmed until it lists them (`unconfirmedUpload`): noted in
/// the write that records an upload, forgotten when confirmed.
@Suite struct UnconfirmedUploadStoreTests {
    @Test func anUploadIsUnconfirmedUntilConfirmed() throws {
        try withStore { store, _ in
            let id = try makeDomain(store)
            let opened = try store.openJournalEntries(
                (0..<3).map { JournalEntry(domainID: id, templateIdentifier: "create:u\($0)", operation: "create", payload: "{}") })
            let rows = (0..<3).map { index in
                var row = record(id, "u\(index)", size: 1)
                row.state = .materialized
                row.localContentVersion = Data("sent\(index)".utf8)
                return row
            }
            try store.save(rows, finishing: opened.map(\.entry))
            for index in 0..<3 {
                let noted = try store.unconfirmedUpload(domainID: id, identifier: ItemIdentifier("u\(index)"))
                #expect(noted?.contentVersion == Data("sent\(index)".utf8), "u\(index)")
            }
            try store.confirmUploads(domainID: id, [ItemIdentifier("u0"), ItemIdentifier("u2")])
            #expect(try store.unconfirmedUpload(domainID: id, identifier: ItemIdentifier("u0")) == nil)
            #expect(try store.unconfirmedUpload(domainID: id, identifier: ItemIdentifier("u1")) != nil)
            #expect(try store.unconfirmedUpload(domainID: id, identifier: ItemIdentifier("u2")) == nil)
        }
    }
}
