import Foundation
import LocalAdapter
import ProviderCore
import ProviderTesting
import Testing

@Suite("BackendConformance")
struct ConformanceTests {
    /// A local backend over a fresh temporary folder, with small pages so paging is exercised.
    static let local = BackendConformance(
        makeBackend: { try LocalBackend(rootPath: try TemporaryFolder().path, pageSize: 64) },
        sameStore: { first in try LocalBackend(rootPath: try #require(first as? LocalBackend).rootPath, pageSize: 64) },
        tearDown: { backend in
            if let local = backend as? LocalBackend { try? FileManager.default.removeItem(atPath: local.rootPath) }
        })

    static let memory = BackendConformance(makeBackend: { MemoryBackend(pageSize: 50) })

    @Test("LocalBackend", arguments: BackendConformance.checkNames)
    func local(_ name: String) async throws {
        try await Self.local.run(name)
    }

    @Test("MemoryBackend", arguments: BackendConformance.checkNames)
    func memory(_ name: String) async throws {
        try await Self.memory.run(name)
    }

    @Test("MemoryBackend without a change feed", arguments: ["changeFeedReportsChanges", "changeFeedRejectsUnknownAnchor"])
    func memoryWithoutFeed(_ name: String) async throws {
        try await BackendConformance(makeBackend: { MemoryBackend(hasChangeFeed: false) }).run(name)
    }

    /// Every check passes against a store that cannot move: the move checks verify that it
    /// declines with `notSupported` and changes nothing.
    @Test("MemoryBackend without server-side moves", arguments: BackendConformance.checkNames)
    func memoryWithoutMoves(_ name: String) async throws {
        try await BackendConformance(makeBackend: { MemoryBackend(pageSize: 50, supportsServerSideMove: false) }).run(name)
    }

    /// The second-writer check compares two backends: given a "second" one over another store,
    /// it fails (it is not passed by having nothing to compare).
    @Test func aSecondBackendOverAnotherStoreFailsTheSecondWriterCheck() async {
        let wrong = BackendConformance(
            makeBackend: { try LocalBackend(rootPath: try TemporaryFolder().path, pageSize: 64) },
            sameStore: { _ in try LocalBackend(rootPath: try TemporaryFolder().path, pageSize: 64) })
        await #expect(throws: ConformanceFailure.self) { try await wrong.run("changesByASecondWriterAreSeen") }
    }

    @Test func suiteHasEnoughChecks() {
        #expect(BackendConformance.checkNames.count >= 45)
        #expect(Set(BackendConformance.checkNames).count == BackendConformance.checkNames.count)
    }

    @Test func unknownCheckFails() async {
        await #expect(throws: ConformanceFailure.self) { try await Self.memory.run("no-such-check") }
    }
}
