import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Local items the store cannot take (``BackendCapabilities/creatableKinds``,
/// ``BackendCapabilities/maximumUploadSize``) are excluded from sync before anything is sent:
/// kept in the replica as they are, told once, listed by the domain, never retried until they
/// change; everything else in the same sync goes up.
@Suite("Items excluded from sync by the store's capabilities")
struct ExcludedFromSyncTests {
    /// A store without symlinks, as WebDAV or the media API.
    static func withoutSymlinks() -> MemoryBackend {
        MemoryBackend(hasChangeFeed: false, pageSize: 7, creatableKinds: [.file, .folder])
    }

    /// A store that takes files up to 1,000 bytes.
    static func limited() -> MemoryBackend {
        MemoryBackend(hasChangeFeed: false, pageSize: 7, maximumUploadSize: 1_000)
    }

    static func write(_ data: Data, _ url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    static func isSymlink(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
    }

    @Test func aSymlinkTheStoreCannotHoldIsKeptLocalAndToldOnce() async throws {
        try await Fixture.with(memory: Self.withoutSymlinks()) { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            let link = f.url(controller, "link")
            #expect(symlink("target.txt", link.path) == 0)
            try Self.write(Data("plain".utf8), f.url(controller, "plain.txt"))
            let report = try await controller.sync()
            #expect(report.notices.count == 1, "\(report.notices)")
            #expect(report.notices.first?.contains("/link") == true && report.notices.first?.contains("symlink") == true)
            #expect(report.uploaded == 1)
            #expect(f.memory.contents(of: "plain.txt") == Data("plain".utf8))
            #expect(f.memory.callCount(.createItem) == 1, "only plain.txt was sent")
            #expect(Self.isSymlink(link), "the symlink stays as it was")
            let excluded = try f.manager.excludedItems(inDomain: "mem")
            #expect(excluded.map(\.path) == ["link"] && excluded.first?.kind == "symlink")
            #expect(excluded.first?.reason.contains("cannot hold symlinks") == true, "\(excluded)")

            let again = try await controller.sync()
            #expect(again.notices.isEmpty && again.uploaded == 0, "\(again.notices)")
            #expect(f.memory.callCount(.createItem) == 1, "not retried")
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["link"])
            let unsent = try await f.manager.unsentChanges(inDomain: "mem")
            #expect(unsent.map(\.path) == ["/link"] && unsent.first?.reason.contains("excluded from sync") == true, "\(unsent)")

            // Replaced by a regular file: sendable, it goes up.
            #expect(unlink(link.path) == 0)
            try Self.write(Data("now a file".utf8), link)
            let later = try await controller.sync()
            #expect(later.notices.isEmpty && later.uploaded == 1, "\(later.notices)")
            #expect(f.memory.contents(of: "link") == Data("now a file".utf8))
            #expect(try f.manager.excludedItems(inDomain: "mem").isEmpty)
        }
    }

    @Test func aSymlinkIsNeverSentEvenWhereTheStoreHoldsSymlinks() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(symlink("/etc/passwd", f.url(controller, "link").path) == 0)
            let report = try await controller.sync()
            #expect(report.notices.count == 1 && report.notices.first?.contains("never sent") == true, "\(report.notices)")
            #expect(f.memory.callCount(.createItem) == 0)
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["link"])
            // Gone from the replica: no longer listed.
            #expect(unlink(f.url(controller, "link").path) == 0)
            let again = try await controller.sync()
            #expect(again.notices.isEmpty, "\(again.notices)")
            #expect(try f.manager.excludedItems(inDomain: "mem").isEmpty)
        }
    }

    @Test func aNewFileOverTheLimitIsRefusedBeforeAByteIsSent() async throws {
        try await Fixture.with(memory: Self.limited()) { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            let big = f.url(controller, "big.bin")
            try Self.write(Data(repeating: 7, count: 2_000), big)
            try Self.write(Data("small".utf8), f.url(controller, "docs/small.txt"))
            let report = try await controller.sync()
            #expect(report.notices.count == 1, "\(report.notices)")
            let notice = report.notices.first ?? ""
            #expect(notice.contains("/big.bin") && notice.contains("2,000 bytes") && notice.contains("1,000 bytes"), "\(notice)")
            #expect(f.memory.callCount(.createItem) == 2, "docs and small.txt, not big.bin")
            #expect(f.memory.contents(of: "docs/small.txt") == Data("small".utf8))
            #expect(f.memory.contents(of: "big.bin") == nil)
            #expect(FileManager.default.contents(atPath: big.path)?.count == 2_000, "kept in the replica")
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["big.bin"])

            for _ in 0..<2 {
                let again = try await controller.sync()
                #expect(again.notices.isEmpty && again.uploaded == 0, "\(again.notices)")
            }
            #expect(f.memory.callCount(.createItem) == 2, "not retried")

            // Changed to fit: it goes up.
            try Self.write(Data(repeating: 8, count: 900), big)
            let later = try await controller.sync()
            #expect(later.notices.isEmpty && later.uploaded == 1, "\(later.notices)")
            #expect(f.memory.contents(of: "big.bin")?.count == 900)
            #expect(try f.manager.excludedItems(inDomain: "mem").isEmpty)
        }
    }

    @Test func anEditOverTheLimitIsRefusedAndTheStoreKeepsItsVersion() async throws {
        try await Fixture.with(memory: Self.limited()) { f in
            _ = try f.memory.write(path: "a.txt", data: Data("first".utf8))
            _ = try f.memory.write(path: "b.txt", data: Data("second".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a.txt", "b.txt"], recursive: false)
            try Self.write(Data(repeating: 1, count: 5_000), f.url(controller, "a.txt"))
            try Self.write(Data("second, edited".utf8), f.url(controller, "b.txt"))
            let report = try await controller.sync()
            #expect(report.notices.count == 1 && report.notices.first?.contains("/a.txt") == true, "\(report.notices)")
            #expect(report.uploaded == 1)
            #expect(f.memory.callCount(.modifyItem) == 1, "only b.txt was sent")
            #expect(f.memory.contents(of: "a.txt") == Data("first".utf8))
            #expect(f.memory.contents(of: "b.txt") == Data("second, edited".utf8))
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["a.txt"])
            // Its local edit is not lost: it cannot be evicted.
            let evicted = await controller.evict(paths: ["a.txt"], recursive: false)
            #expect(evicted.first?.error?.code == .unsyncedEdits)

            let again = try await controller.sync()
            #expect(again.notices.isEmpty && again.uploaded == 0, "\(again.notices)")
            #expect(f.memory.callCount(.modifyItem) == 1, "not retried")

            try Self.write(Data("fits".utf8), f.url(controller, "a.txt"))
            let later = try await controller.sync()
            #expect(later.notices.isEmpty && later.uploaded == 1, "\(later.notices)")
            #expect(f.memory.contents(of: "a.txt") == Data("fits".utf8))
            #expect(try f.manager.excludedItems(inDomain: "mem").isEmpty)
        }
    }

    /// A refusal the engine could not foresee (the media API's original dialect refuses names
    /// it would not list, with `notSupported`) is told once and not sent again until the item
    /// changes; its journal entry is closed.
    @Test func aRefusalByTheStoreIsToldOnceAndNotRetriedUntilTheItemChanges() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "kept.txt", data: Data("kept".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["kept.txt"], recursive: false)
            let notes = f.url(controller, "notes.txt")
            try Self.write(Data("text".utf8), notes)
            f.memory.setFailure(FileProviderError(.notSupported, "this store lists images only"), for: .createItem, times: 1)
            let report = try await controller.sync()
            #expect(report.notices.count == 1, "\(report.notices)")
            #expect(report.notices.first?.contains("excluded from sync: the store refused it: this store lists images only") == true)
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["notes.txt"])
            #expect(try f.manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty, "its entry is closed")

            try Self.write(Data("other".utf8), f.url(controller, "other.txt"))
            f.memory.setFailure(FileProviderError(.notSupported, "too large for this store"), for: .modifyItem, times: 1)
            try Self.write(Data("kept, edited".utf8), f.url(controller, "kept.txt"))
            let again = try await controller.sync()
            #expect(again.uploaded == 1 && again.notices.count == 1, "\(again.notices)")
            #expect(again.notices.first?.contains("/kept.txt") == true)
            #expect(f.memory.callCount(.createItem) == 2, "other.txt only: notes.txt is not sent again")
            #expect(f.memory.callCount(.modifyItem) == 1)
            let quiet = try await controller.sync()
            #expect(quiet.notices.isEmpty && quiet.uploaded == 0, "\(quiet.notices)")
            #expect(f.memory.callCount(.createItem) == 2 && f.memory.callCount(.modifyItem) == 1, "neither is sent again")
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["kept.txt", "notes.txt"])

            // Changed: sent again, and taken this time.
            try Self.write(Data("text, edited".utf8), notes)
            try Self.write(Data("kept, edited again".utf8), f.url(controller, "kept.txt"))
            let later = try await controller.sync()
            #expect(later.notices.isEmpty && later.uploaded == 2, "\(later.notices)")
            #expect(f.memory.contents(of: "notes.txt") == Data("text, edited".utf8))
            #expect(f.memory.contents(of: "kept.txt") == Data("kept, edited again".utf8))
            #expect(try f.manager.excludedItems(inDomain: "mem").isEmpty)
        }
    }

    /// Without server-side moves a moved file would go up again whole: one over the limit is
    /// excluded with the deletion of its old place, so the store keeps its copy.
    @Test func aMovedFileOverTheLimitKeepsTheStoresCopyWhereTheStoreCannotMove() async throws {
        let store = MemoryBackend(hasChangeFeed: false, pageSize: 7, supportsServerSideMove: false, maximumUploadSize: 1_000)
        try await Fixture.with(memory: store) { f in
            _ = try f.memory.write(path: "a/doc.txt", data: Data("contents".utf8))
            _ = try f.memory.write(path: "b/keep.txt", data: Data("x".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a/doc.txt"], recursive: false)
            let handle = try FileHandle(forWritingTo: f.url(controller, "a/doc.txt"))
            try handle.write(contentsOf: Data(repeating: 3, count: 2_000))
            try handle.close()
            #expect(rename(f.url(controller, "a/doc.txt").path, f.url(controller, "b/doc.txt").path) == 0)
            let report = try await controller.sync()
            #expect(report.notices.count == 1 && report.notices.first?.contains("/b/doc.txt") == true, "\(report.notices)")
            #expect(f.memory.callCount(.createItem) == 0 && f.memory.callCount(.deleteItem) == 0)
            #expect(f.memory.contents(of: "a/doc.txt") == Data("contents".utf8), "the store keeps its copy")
            let again = try await controller.sync()
            #expect(again.notices.isEmpty && again.uploaded == 0, "\(again.notices)")
            #expect(f.memory.callCount(.createItem) == 0 && f.memory.callCount(.deleteItem) == 0)
        }
    }

    /// `serve` compares only the folders a watcher saw change: an exclusion elsewhere stays
    /// recorded while its item is there, untold, and is forgotten once the item is gone.
    @Test func aScanOfSomeFoldersKeepsExclusionsElsewhereUntilTheirItemIsGone() async throws {
        try await Fixture.with(memory: Self.limited()) { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try Self.write(Data(repeating: 7, count: 2_000), f.url(controller, "big.bin"))
            let report = try await controller.sync()
            #expect(report.notices.count == 1, "\(report.notices)")
            let changes = ChangedFolders()
            changes.watched { true }
            _ = await changes.take()
            try Self.write(Data("one".utf8), f.url(controller, "docs/one.txt"))
            changes.treeAppeared("docs")
            let scoped = try await controller.sync(changes: changes)
            #expect(scoped.notices.isEmpty && scoped.uploaded == 2, "\(scoped.notices)")
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["big.bin"], "still there, still excluded")
            #expect(unlink(f.url(controller, "big.bin").path) == 0)
            try Self.write(Data("two".utf8), f.url(controller, "docs/two.txt"))
            changes.folderChanged("docs")
            let later = try await controller.sync(changes: changes)
            #expect(later.notices.isEmpty && later.uploaded == 1, "\(later.notices)")
            #expect(try f.manager.excludedItems(inDomain: "mem").isEmpty, "gone from the replica: forgotten")
            #expect(f.memory.callCount(.createItem) == 3, "docs, one.txt, two.txt; never big.bin")
        }
    }

    @Test func aFolderTheStoreCannotCreateKeepsWhatIsInItLocal() async throws {
        try await Fixture.with(memory: MemoryBackend(hasChangeFeed: false, pageSize: 7, creatableKinds: [.file])) { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try Self.write(Data("in".utf8), f.url(controller, "folder/inside.txt"))
            try Self.write(Data("top".utf8), f.url(controller, "top.txt"))
            let report = try await controller.sync()
            #expect(report.notices.count == 1 && report.notices.first?.contains("/folder") == true, "\(report.notices)")
            #expect(f.memory.callCount(.createItem) == 1 && f.memory.contents(of: "top.txt") == Data("top".utf8))
            #expect(try f.manager.excludedItems(inDomain: "mem").map(\.path) == ["folder"])
            let again = try await controller.sync()
            #expect(again.notices.isEmpty && again.uploaded == 0, "\(again.notices)")
            #expect(f.memory.callCount(.createItem) == 1)
            #expect(FileManager.default.contents(atPath: f.url(controller, "folder/inside.txt").path) == Data("in".utf8))
        }
    }
}
