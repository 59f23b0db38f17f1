import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// What uploads cut short leave behind: staging files in the server's folders.
@Suite("SFTP leftovers")
struct LeftoverTests {
    @Test func listingAFolderRemovesAbandonedStagingFilesAndNothingElse() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let docs = URL(fileURLWithPath: root).appendingPathComponent("docs")
        try FileManager.default.createDirectory(at: docs, withIntermediateDirectories: false)
        let inDocs = try StagingLeftovers.make(in: docs)
        let atRoot = try StagingLeftovers.make(in: URL(fileURLWithPath: root))
        let backend = try TestServer.backend(server, root: root)
        let items = try await backend.enumerateAllItems(in: "docs")
        let rootItems = try await backend.enumerateAllItems(in: .rootContainer)
        await backend.close()

        for (folder, leftovers, listed) in [(docs, inDocs, items), (URL(fileURLWithPath: root), atRoot, rootItems)] {
            let names = StagingLeftovers.names(in: folder)
            for name in leftovers.abandoned { #expect(!names.contains(name), "\(name) was not removed from \(folder.path)") }
            for name in leftovers.inFlight + leftovers.kept { #expect(names.contains(name), "\(name) was removed from \(folder.path)") }
            #expect(Set(listed.map(\.filename)).subtracting(["docs"]) == leftovers.listed)
        }
    }

}
