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
    /// A folder deleted here whose only entries are staging files nobody writes any more is
    /// deleted with them; one an upload still writes (its lock held) stays, as does a folder
    /// with anything else in it.
    @Test func deletingAFolderRemovesTheAbandonedStagingFilesInIt() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let gone = folder.url.appendingPathComponent("gone")
        let busy = folder.url.appendingPathComponent("busy")
        for inside in [gone, busy] {
            try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: false)
            try Data("partial".utf8).write(to: inside.appendingPathComponent(StagingName.make()))
        }
        let writing = busy.appendingPathComponent(StagingName.make())
        try Data("still writing".utf8).write(to: writing)
        let writer = try lock(writing)
        defer { close(writer) }
        let backend = try LocalBackend(rootPath: folder.path)
        defer { Task { await backend.close() } }
        try await backend.deleteItem(identifier: "gone", baseVersion: nil, options: [])
        #expect(!FileManager.default.fileExists(atPath: gone.path))
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.deleteItem(identifier: "busy", baseVersion: nil, options: [])
        }
        #expect(error?.code == .directoryNotEmpty)
        #expect(FileManager.default.fileExists(atPath: writing.path))
    }

    @Test func listingAFolderRemovesAbandonedStagingFilesAndNothingElse() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let docs = folder.url.appendingPathComponent("docs")
        try FileManager.default.createDirectory(at: docs, withIntermediateDirectories: false)
        let leftovers = try StagingLeftovers.make(in: docs)
        // The local backend tells an upload in progress by its writer's lock, whatever the
        // times: the uploads in progress hold theirs, and so does an old one still written.
        let held = StagingName.make()
        try Data("still writing".utf8).write(to: docs.appendingPathComponent(held))
        let old = Date().addingTimeInterval(-2 * StagingName.abandonedAge)
        try StagingLeftovers.setTimes(docs.appendingPathComponent(held).path, modified: old, accessed: old)
        let writers = try (leftovers.inFlight + [held]).map { try lock(docs.appendingPathComponent($0)) }
        defer { for writer in writers { close(writer) } }
        // A fresh file nobody holds: its writer just died.
        let justKilled = StagingName.make()
        try Data("partial upload".utf8).write(to: docs.appendingPathComponent(justKilled))

        let backend = try LocalBackend(rootPath: folder.path)
        let items = try await backend.enumerateAllItems(in: "docs")
        await backend.close()

        let names = StagingLeftovers.names(in: docs)
        for name in leftovers.abandoned + [justKilled] { #expect(!names.contains(name), "\(name) was not removed") }
        for name in leftovers.inFlight + leftovers.kept + [held] { #expect(names.contains(name), "\(name) was removed") }
        // Only plain names are items.
        #expect(Set(items.map(\.filename)) == leftovers.listed)
    }

    /// Opens `url` and takes the lock a writer of the local backend holds (`F_OFD_SETLK`).
    private func lock(_ url: URL) throws -> Int32 {
        let fd = open(url.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError.error("cannot open", path: url.path) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        guard fcntl(fd, 37 /* F_OFD_SETLK */, &lock) == 0 else {
            close(fd)
            throw POSIXError.error("cannot lock", path: url.path)
        }
        return fd
    }

}
