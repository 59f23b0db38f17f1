import Foundation
import LocalAdapter
import ProviderCore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What uploads cut short leave behind: staging files in the store's folders.
@Suite("LocalBackend leftovers")
struct LeftoverTests {
    @Test func listingAFolderRemovesAbandonedStagingFilesAndNothingElse() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let docs = folder.url.appendingPathComponent("docs")
        try FileManager.default.createDirectory(at: docs, withIntermediateDirectories: false)
        let leftovers = try StagingLeftovers.make(in: docs)
        // Old, but its writer (on this machine) still holds its lock.
        let held = StagingName.make()
        let heldPath = docs.appendingPathComponent(held).path
        try Data("still writing".utf8).write(to: URL(fileURLWithPath: heldPath))
        let old = Date().addingTimeInterval(-2 * StagingName.abandonedAge)
        try StagingLeftovers.setTimes(heldPath, modified: old, accessed: old)
        let writer = open(heldPath, O_RDWR | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        #expect(fcntl(writer, 37 /* F_OFD_SETLK */, &lock) == 0)

        let backend = try LocalBackend(rootPath: folder.path)
        let items = try await backend.enumerateAllItems(in: "docs")
        await backend.close()

        let names = StagingLeftovers.names(in: docs)
        for name in leftovers.abandoned { #expect(!names.contains(name), "\(name) was not removed") }
        for name in leftovers.kept + [held] { #expect(names.contains(name), "\(name) was removed") }
        // Only plain names are items.
        #expect(Set(items.map(\.filename)) == leftovers.listed)
    }

}
