import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A store that cannot move or rename items (`supportsServerSideMove` false) is never sent a
/// move: a downloaded file that moved goes as a new file and a deletion; a placeholder or a
/// folder that moved is moved back, with a notice.
@Suite("Moves to a store without server-side moves")
struct MovesWithoutServerSupportTests {
    static func store() -> MemoryBackend { MemoryBackend(hasChangeFeed: false, pageSize: 7, supportsServerSideMove: false) }

    @Test func aDownloadedFileThatMovedIsSentAsANewFileAndADeletion() async throws {
        try await Fixture.with(memory: Self.store()) { f in
            _ = try f.memory.write(path: "a/doc.txt", data: Data("contents".utf8))
            _ = try f.memory.write(path: "b/keep.txt", data: Data("x".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a/doc.txt"], recursive: false)
            #expect(rename(f.url(controller, "a/doc.txt").path, f.url(controller, "b/renamed.txt").path) == 0)
            let report = try await controller.sync()
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(f.memory.callCount(.modifyItem) == 0, "no move was sent")
            #expect(f.memory.contents(of: "b/renamed.txt") == Data("contents".utf8))
            #expect(f.memory.contents(of: "a/doc.txt") == nil)
            #expect(try controller.record(at: "b/renamed.txt").state == .materialized)
            let again = try await controller.sync()
            #expect(again.uploaded == 0 && again.notices.isEmpty, "\(again.notices)")
        }
    }

    @Test func aPlaceholderOrFolderThatMovedIsMovedBack() async throws {
        try await Fixture.with(memory: Self.store()) { f in
            _ = try f.memory.write(path: "a/doc.txt", data: Data("contents".utf8))
            _ = try f.memory.write(path: "folder/inside.txt", data: Data("in".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(rename(f.placeholderURL(controller, "a/doc.txt").path, f.placeholderURL(controller, "moved.txt").path) == 0)
            #expect(rename(f.url(controller, "folder").path, f.url(controller, "renamed").path) == 0)
            let report = try await controller.sync()
            #expect(report.notices.count == 2, "\(report.notices)")
            #expect(report.notices.allSatisfy { $0.contains("cannot move or rename") }, "\(report.notices)")
            #expect(f.memory.callCount(.modifyItem) == 0 && f.memory.callCount(.deleteItem) == 0)
            #expect(FileManager.default.fileExists(atPath: f.placeholderURL(controller, "a/doc.txt").path))
            #expect(!FileManager.default.fileExists(atPath: f.placeholderURL(controller, "moved.txt").path))
            #expect(FileManager.default.fileExists(atPath: f.placeholderURL(controller, "folder/inside.txt").path))
            #expect(f.memory.contents(of: "a/doc.txt") == Data("contents".utf8))
            let again = try await controller.sync()
            #expect(again.notices.isEmpty && again.uploaded == 0, "\(again.notices)")
        }
    }
}
