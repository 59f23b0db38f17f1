import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// An item below a folder that does not exist is `noSuchItem`, every time: libssh2 1.10 reports a
/// wrong status for a failed REALPATH (a different one on each call), which once made the engine
/// park a deletion below a folder another device had removed as `cannotSynchronize`.
@Suite("SFTP missing folders")
struct MissingFolderTests {
    @Test func itemsBelowAMissingFolderAreNoSuchItemEveryTime() async throws {
        let server = try await TestServer.shared()
        let backend = try TestServer.backend(server)
        defer { try? FileManager.default.removeItem(atPath: backend.rootFolder) }
        try FileManager.default.createDirectory(atPath: backend.rootFolder + "/文件夹", withIntermediateDirectories: true)
        for _ in 0..<3 {
            for identifier in ["gone/inside.txt", "gone/deeper/inside.txt", "文件夹/gone/Ordner ä/a"] {
                do {
                    _ = try await backend.item(for: ItemIdentifier(identifier))
                    Issue.record("found \(identifier), which does not exist")
                } catch {
                    #expect(error.code == .noSuchItem, "\(identifier): \(error.code.name): \(error.message)")
                }
                do {
                    try await backend.deleteItem(identifier: ItemIdentifier(identifier), baseVersion: nil, options: [])
                    Issue.record("deleted \(identifier), which does not exist")
                } catch {
                    #expect(error.code == .noSuchItem, "\(identifier): \(error.code.name): \(error.message)")
                }
            }
        }
        await backend.close()
    }
}
