import Foundation
import LocalAdapter
import ProviderCore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The local backend's change feed, with changes made on disk by other programs (the
/// conformance suite covers changes made through the backend).
@Suite("LocalChangeFeed")
struct LocalChangeFeedTests {
    func withBackend(_ body: (LocalBackend, TemporaryFolder) async throws -> Void) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let backend = try LocalBackend(rootPath: folder.path, pageSize: 16)
        do {
            try await body(backend, folder)
        } catch {
            await backend.close()
            throw error
        }
        await backend.close()
    }

    /// Everything the feed reports from an anchor, following `moreComing`.
    func changes(_ backend: LocalBackend, from anchor: SyncAnchor, in container: ItemIdentifier = .workingSet) async throws
        -> (updated: [String: Item], deleted: Set<String>, anchor: SyncAnchor)
    {
        var updated: [String: Item] = [:]
        var deleted = Set<String>()
        var current = anchor
        for _ in 0..<100 {
            let set = try await backend.enumerateChanges(in: container, from: current)
            for item in set.updatedItems { updated[item.identifier.rawValue] = item }
            deleted.formUnion(set.deletedIdentifiers.map(\.rawValue))
            current = set.newAnchor
            if !set.moreComing { return (updated, deleted, current) }
        }
        Issue.record("the feed keeps saying moreComing")
        return (updated, deleted, current)
    }

    func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test func changesMadeByOtherProgramsAreReported() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            try FileManager.default.createDirectory(atPath: root + "/docs", withIntermediateDirectories: true)
            try write("old", to: root + "/docs/edited.txt")
            try write("bye", to: root + "/docs/doomed.txt")
            try write("move me", to: root + "/docs/moving.txt")
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            try write("new", to: root + "/created.txt")
            try write("new, longer", to: root + "/docs/edited.txt")
            try FileManager.default.removeItem(atPath: root + "/docs/doomed.txt")
            #expect(rename(root + "/docs/moving.txt", root + "/moved.txt") == 0)
            let result = try await changes(backend, from: anchor)
            #expect(result.updated["created.txt"]?.kind == .file)
            #expect(result.updated["docs/edited.txt"]?.size == 11)
            #expect(result.updated["moved.txt"] != nil)
            #expect(result.deleted == ["docs/doomed.txt", "docs/moving.txt"])
            let again = try await changes(backend, from: result.anchor)
            #expect(again.updated.isEmpty && again.deleted.isEmpty)
        }
    }

    @Test func aFolderMovedInIsReportedWithEverythingInIt() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            let outside = try TemporaryFolder()
            defer { outside.remove() }
            try FileManager.default.createDirectory(atPath: outside.path + "/tree/a/b", withIntermediateDirectories: true)
            try write("deep", to: outside.path + "/tree/a/b/deep.txt")
            for index in 0..<40 { try write("\(index)", to: outside.path + "/tree/a/file\(index).txt") }
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            #expect(rename(outside.path + "/tree", root + "/tree") == 0)
            let before = try await changes(backend, from: anchor)
            for path in ["tree", "tree/a", "tree/a/b", "tree/a/b/deep.txt", "tree/a/file39.txt"] {
                #expect(before.updated[path] != nil, "\(path) is not in the changes")
            }
            // Made in the new folder after it moved in: seen through the folder's new watch.
            try write("later", to: root + "/tree/a/b/later.txt")
            let after = try await changes(backend, from: before.anchor)
            #expect(after.updated["tree/a/b/later.txt"] != nil, "a file made in a folder that moved in is not seen")
        }
    }

    @Test func aFolderMovedOutIsDeletedAndNoLongerWatched() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            let outside = try TemporaryFolder()
            defer { outside.remove() }
            try FileManager.default.createDirectory(atPath: root + "/leaving/sub", withIntermediateDirectories: true)
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            #expect(rename(root + "/leaving", outside.path + "/left") == 0)
            let result = try await changes(backend, from: anchor)
            #expect(result.deleted.contains("leaving"))
            try write("elsewhere", to: outside.path + "/left/sub/x.txt")
            let after = try await changes(backend, from: result.anchor)
            #expect(after.updated.isEmpty && after.deleted.isEmpty, "\(after.updated.keys) \(after.deleted)")
        }
    }

    @Test func symlinksAreReportedNotFollowed() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            let outside = try TemporaryFolder()
            defer { outside.remove() }
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            #expect(symlink(outside.path, root + "/link") == 0)
            let result = try await changes(backend, from: anchor)
            #expect(result.updated["link"]?.kind == .symlink)
            // A change in the folder the link points at is not the store's.
            try write("x", to: outside.path + "/x.txt")
            let after = try await changes(backend, from: result.anchor)
            #expect(after.updated.isEmpty && after.deleted.isEmpty)
        }
    }

    @Test func aFolderFeedHasOnlyWhatIsBelowIt() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            try FileManager.default.createDirectory(atPath: root + "/mine", withIntermediateDirectories: true)
            let anchor = try await backend.currentSyncAnchor(for: ItemIdentifier("mine"))
            try write("a", to: root + "/mine/a.txt")
            try write("b", to: root + "/other.txt")
            let result = try await changes(backend, from: anchor, in: ItemIdentifier("mine"))
            #expect(Set(result.updated.keys) == ["mine/a.txt"])
            await #expect(throws: FileProviderError.self) {
                _ = try await backend.currentSyncAnchor(for: ItemIdentifier("missing"))
            }
        }
    }

    @Test func anAnchorOfAnotherRunExpires() async throws {
        try await withBackend { backend, folder in
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            let other = try LocalBackend(rootPath: folder.path)
            defer { Task { await other.close() } }
            let error = await #expect(throws: FileProviderError.self) {
                _ = try await other.enumerateChanges(in: .workingSet, from: anchor)
            }
            #expect(error?.code == .syncAnchorExpired)
        }
    }

    /// The feed names folders, not what was in them: a folder that went away and came back
    /// under the same name (other items in it) can only be told by listing everything.
    @Test func aFolderReplacedUnderTheSameNameExpiresTheAnchor() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            try FileManager.default.createDirectory(atPath: root + "/box", withIntermediateDirectories: true)
            try write("old", to: root + "/box/old.txt")
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            try FileManager.default.removeItem(atPath: root + "/box")
            try FileManager.default.createDirectory(atPath: root + "/box", withIntermediateDirectories: true)
            try write("new", to: root + "/box/new.txt")
            let error = await #expect(throws: FileProviderError.self) {
                _ = try await backend.enumerateChanges(in: .workingSet, from: anchor)
            }
            #expect(error?.code == .syncAnchorExpired)
        }
    }

    /// Once the engine was told a folder is gone, a new one under its name is only new.
    @Test func aFolderMadeAgainAfterItsDeletionWasReportedIsNew() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            try FileManager.default.createDirectory(atPath: root + "/box", withIntermediateDirectories: true)
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            try FileManager.default.removeItem(atPath: root + "/box")
            let first = try await changes(backend, from: anchor)
            #expect(first.deleted == ["box"])
            try FileManager.default.createDirectory(atPath: root + "/box", withIntermediateDirectories: true)
            try write("new", to: root + "/box/new.txt")
            let second = try await changes(backend, from: first.anchor)
            #expect(second.updated["box"]?.kind == .folder)
            #expect(second.updated["box/new.txt"] != nil)
        }
    }

    @Test func moreChangesThanTheLogHoldsExpireTheAnchor() async throws {
        try await withBackend { backend, folder in
            let root = folder.path
            let count = 10_001
            for index in 0..<count { #expect(close(open(root + "/f\(index)", O_CREAT | O_WRONLY, 0o644)) == 0) }
            let anchor = try await backend.currentSyncAnchor(for: .workingSet)
            for index in 0..<count { #expect(unlink(root + "/f\(index)") == 0) }
            let error = await #expect(throws: FileProviderError.self) {
                _ = try await backend.enumerateChanges(in: .workingSet, from: anchor)
            }
            #expect(error?.code == .syncAnchorExpired)
            // A fresh anchor works again.
            let fresh = try await backend.currentSyncAnchor(for: .workingSet)
            try write("x", to: root + "/after.txt")
            let result = try await changes(backend, from: fresh)
            #expect(result.updated["after.txt"] != nil)
        }
    }
}
