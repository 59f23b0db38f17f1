import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing
import WebDAVAdapter

/// Through the engine against the Nextcloud emulation: a file another client replaces (`DELETE`,
/// then `PUT` of the same name: a new `oc:fileid`) keeps its place in the replica, and nothing
/// is sent back to delete it.
@Suite("WebDAV --vendor nextcloud: a replaced file")
struct NextcloudReplacedItemTests {
    @Test func aFileReplacedOnTheServerIsNeitherDeletedThereNorHere() async throws {
        let server = try await SharedNextcloud.server()
        let url = try server.makeFolder()
        let setup = try await WebDAVBackend(url: url, vendor: .nextcloud)
        func put(_ text: String) async throws -> Item {
            let source = try NextcloudTests.upload(Data(text.utf8))
            defer { try? FileManager.default.removeItem(at: source) }
            return try await setup.createItem(
                basedOn: Item(identifier: ItemIdentifier("a.txt"), parentIdentifier: .rootContainer, filename: "a.txt", kind: .file),
                fields: [], contents: source, options: []
            ).item
        }
        let first = try await put("first")

        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-nc-replaced-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (manager, controller, home) = try await NextcloudTests.domain(url: url, in: scratch)
        _ = try await controller.sync()
        #expect(try controller.record(at: "a.txt").identifier == first.identifier)

        // Another client replaces it: deleted, then uploaded again under the same name.
        try await setup.deleteItem(identifier: first.identifier, baseVersion: nil, options: [])
        let second = try await put("second, longer")
        #expect(second.identifier != first.identifier, "the emulation gives a new oc:fileid")

        var reports: [SyncReport] = []
        for _ in 0..<3 { reports.append(try await controller.sync()) }
        #expect(reports.allSatisfy { $0.deleted == 0 && $0.uploaded == 0 && $0.notices.isEmpty }, "\(reports)")
        let listed = try await setup.enumerateAllItems(in: .rootContainer)
        #expect(listed.map(\.filename) == ["a.txt"], "the server keeps the new file")
        let record = try controller.record(at: "a.txt")
        #expect(record.identifier == second.identifier && record.state == .placeholder)
        #expect(FileManager.default.fileExists(atPath: home.appendingPathComponent("domains/nc/a.txt.placeholder").path))
        #expect(await controller.materialize(paths: ["a.txt"], recursive: false).allSatisfy { $0.error == nil })
        #expect(try String(contentsOf: home.appendingPathComponent("domains/nc/a.txt"), encoding: .utf8) == "second, longer")
        await setup.close()
        await manager.close()
    }
}
