import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

/// What keeps files created at once out of each other's way: downloads stage in several
/// folders, uploads sent together go to different folders.
@Suite struct ConcurrentCreationTests {
    private func created(_ path: String) -> LocalChange {
        .created(
            path: path, kind: .file,
            fingerprint: FileFingerprint(size: 1, modificationNanos: 0, inode: 0, isRegularFile: true, isDirectory: false))
    }

    @Test func changesSentTogetherTakeTheirFoldersInTurn() {
        let paths = ["a/1", "a/2", "a/3", "b/1", "b/2", "top", "c/1", "top2"]
        let spread = SyncUp.spreadOverFolders(ArraySlice(paths.map(created))).map(\.path)
        #expect(spread == ["a/1", "b/1", "top", "c/1", "a/2", "b/2", "top2", "a/3"])
    }

    @Test func changesInOneFolderKeepTheirOrder() {
        let paths = ["a/3", "a/1", "a/2"]
        #expect(SyncUp.spreadOverFolders(ArraySlice(paths.map(created))).map(\.path) == paths)
        #expect(SyncUp.spreadOverFolders([]).isEmpty)
    }

    @Test func stagingFilesSpreadOverFoldersAndKeepTheirPlace() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("staging-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let staging = home.appendingPathComponent("staging")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        let replica = Replica(root: home.appendingPathComponent("replica"), staging: staging)
        let names = (0..<200).map { "\(String($0 * 7919, radix: 16)).part" }
        let folders = Set(names.map { (replica.stagingPath(named: $0) as NSString).deletingLastPathComponent })
        #expect(folders.count == 16)
        #expect(folders.allSatisfy { ($0 as NSString).deletingLastPathComponent == staging.path })
        // The same name always lands in the same place, so a download resumes from its file.
        #expect(names.map { replica.stagingPath(named: $0) } == names.map { replica.stagingPath(named: $0) })

        let path = replica.stagingPath(named: names[0])
        try replica.prepareStagingFile(atPath: path, truncate: true)
        try Data("partial".utf8).write(to: URL(fileURLWithPath: path))
        try replica.prepareStagingFile(atPath: path, truncate: false)
        #expect(replica.fileSize(atPath: path) == 7)
        try FileManager.default.copyItem(atPath: path, toPath: path + ".compare")
        #expect(Set(replica.stagedFiles()) == [path, path + ".compare"])
        replica.removeComparisonCopies()
        #expect(replica.stagedFiles() == [path])
    }

    @Test func placeholdersAppearWholeAndReplaceALeftoverOne() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("placeholders-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let replica = Replica(root: root, staging: root.appendingPathComponent(".staging"))
        func metadata(size: Int64) -> PlaceholderMetadata {
            let item = Item(
                identifier: "a.txt", parentIdentifier: .rootContainer, filename: "a.txt", kind: .file, size: size,
                version: ItemVersion(content: Data([1]), metadata: Data([2])))
            return PlaceholderMetadata(domain: "d", record: ItemRecord(domainID: 1, item: item, path: "a.txt"))
        }
        try replica.createPlaceholder("a.txt", metadata(size: 5))
        #expect(try replica.readPlaceholder("a.txt").size == 5)
        // One left by an interrupted sync is replaced, never doubled.
        try replica.createPlaceholder("a.txt", metadata(size: 7))
        #expect(try replica.readPlaceholder("a.txt").size == 7)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["a.txt" + Replica.placeholderSuffix])
        // A folder that is not there is a clear error naming the placeholder.
        #expect(throws: FileProviderError.self) { try replica.createPlaceholder("missing/b.txt", metadata(size: 1)) }
    }
}
