import Foundation
import ProviderCore
import Testing

@testable import ProviderStore

/// `MetadataStore.setContentPolicy`: one item's policy, and a folder's subtree cleared.
@Suite struct SetContentPolicyTests {
    @Test func aFolderClearsThePoliciesBelowItAndOnlyThose() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let store = try MetadataStore(url: folder.path("metadata.sqlite"))
        let domain = try store.insertDomain(DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/r"))
        let id = try #require(domain.id)
        // "a0" and "ab" sort right after "a/" and "a": not below "a".
        let paths = ["", "a", "a/x", "a/b/y", "a0", "ab", "c"]
        var records: [ItemRecord] = []
        for path in paths {
            var record = ContentPolicyStoreTests().item(path.isEmpty ? "root" : path, domainID: id, path: path)
            if path != "" && path != "a" { record.contentPolicy = .onlineOnly }
            records.append(record)
        }
        try store.apply(domainID: id, upserts: records, deletions: [])

        #expect(try store.setContentPolicy(.eager, domainID: id, path: "a", clearingBelow: true) == ["a/b/y", "a/x"])
        #expect(try store.explicitPolicies(domainID: id) == ["a": .eager, "a0": .onlineOnly, "ab": .onlineOnly, "c": .onlineOnly])
        // A file: nothing below it to clear; `nil` inherits.
        #expect(try store.setContentPolicy(nil, domainID: id, path: "c", clearingBelow: false) == [])
        #expect(try store.item(domainID: id, path: "c")?.contentPolicy == nil)
        // The root clears every other item.
        #expect(try store.setContentPolicy(.lazy, domainID: id, path: "", clearingBelow: true) == ["a", "a0", "ab"])
        #expect(try store.explicitPolicies(domainID: id) == ["": .lazy])
        #expect(throws: FileProviderError.self) { try store.setContentPolicy(.lazy, domainID: id, path: "nope", clearingBelow: true) }
    }
}
