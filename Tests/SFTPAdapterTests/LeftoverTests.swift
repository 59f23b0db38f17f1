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

    /// A folder deleted here whose only entries are staging files (an upload into it cut short
    /// a moment ago, fresh, so no listing removed it yet) is deleted with them; a folder with
    /// anything else in it stays (`directoryNotEmpty`).
    @Test func deletingAFolderRemovesTheStagingFilesInIt() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let gone = URL(fileURLWithPath: root).appendingPathComponent("gone")
        let kept = URL(fileURLWithPath: root).appendingPathComponent("kept")
        for folder in [gone, kept] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            try Data("partial".utf8).write(to: folder.appendingPathComponent(StagingName.make()))
        }
        try Data("mine".utf8).write(to: kept.appendingPathComponent("\(StagingName.prefix)mine.txt"))
        let backend = try TestServer.backend(server, root: root)
        defer { Task { await backend.close() } }
        try await backend.deleteItem(identifier: "gone", baseVersion: nil, options: [])
        #expect(!FileManager.default.fileExists(atPath: gone.path))
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.deleteItem(identifier: "kept", baseVersion: nil, options: [])
        }
        #expect(error?.code == .directoryNotEmpty)
        #expect(FileManager.default.fileExists(atPath: kept.appendingPathComponent("\(StagingName.prefix)mine.txt").path))
    }

}
