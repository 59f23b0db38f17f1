import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// The folders a backend saw a moment ago (``KnownFolders``): new files in a folder check it
/// once, and a folder deleted or moved through the backend is never trusted afterwards.
@Suite("S3 known folders")
struct KnownFoldersTests {
    static func folder(_ name: String, in parent: ItemIdentifier = .rootContainer) -> Item {
        Item.template(identifier: ItemIdentifier("tmp-\(name)"), parent: parent, filename: name, kind: .folder)
    }

    static func file(_ name: String, in parent: ItemIdentifier, size: Int) -> Item {
        Item.template(identifier: ItemIdentifier("tmp-\(name)"), parent: parent, filename: name, kind: .file, size: Int64(size))
    }

    @Test func aFolderDeletedOrMovedHereIsNoLongerTrustedForNewFiles() async throws {
        let backend = try await SharedSeaweedFS.backend()
        let scratch = try MultipartTests.Scratch()
        let (contents, _) = try scratch.file("small", size: 100, seed: 3)
        let made = try await backend.createItem(basedOn: Self.folder("a"), fields: [], contents: nil, options: [])
        let inside = try await backend.createItem(
            basedOn: Self.folder("b", in: made.item.identifier), fields: [], contents: nil, options: [])
        _ = try await backend.createItem(
            basedOn: Self.file("x", in: made.item.identifier, size: 100), fields: [.contents], contents: contents, options: [])
        _ = try await backend.createItem(
            basedOn: Self.file("y", in: inside.item.identifier, size: 100), fields: [.contents], contents: contents, options: [])
        // (The folders are remembered for 5 s only: on a loaded machine they may be forgotten
        // already, and the checks below then hold by the listings alone.)

        // Moved away: the old folder and the one below it are gone, and new files there refused.
        var renamed = made.item
        renamed.filename = "c"
        let moved = try await backend.modifyItem(
            renamed, baseVersion: made.item.version, changedFields: [.filename], contents: nil, options: [])
        for parent in [made.item.identifier, inside.item.identifier] {
            await #expect(throws: FileProviderError.self) {
                _ = try await backend.createItem(
                    basedOn: Self.file("z", in: parent, size: 100), fields: [.contents], contents: contents, options: [])
            }
        }
        #expect(try await backend.item(at: ItemPath(components: ["a"])) == nil, "creating in the old folder made it again")

        // Deleted: the same.
        try await backend.deleteItem(identifier: moved.item.identifier, baseVersion: moved.item.version, options: [.recursive])
        do {
            _ = try await backend.createItem(
                basedOn: Self.file("w", in: moved.item.identifier, size: 100), fields: [.contents], contents: contents, options: [])
            Issue.record("a file was created in a folder this backend deleted")
        } catch {
            #expect(error.code == .noSuchItem, "\(error)")
        }
        #expect(try await backend.item(at: ItemPath(components: ["c"])) == nil)
    }

    @Test func theBackendAsksForAsManyTransfersAsItHasConnections() async throws {
        let (cluster, bucket) = try await SharedSeaweedFS.cluster()
        var http = HTTPOptions()
        http.connections = 16
        let backend = try await S3Backend(
            endpoint: cluster.endpoint, bucket: bucket, prefix: "store-\(UUID().uuidString)", region: cluster.region,
            pathStyle: true, credentials: (cluster.accessKey, cluster.secretKey, nil), http: http)
        #expect(backend.capabilities.concurrentTransfers == 16)
    }
}
