import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Sync down's walk lists a new folder while the replica makes it (``FolderCreation``): a folder
/// the replica cannot make is skipped whole, as when the walk waited for it, and made by the next
/// sync.
@Suite struct FolderCreationTests {
    /// Sets or clears the immutable attribute of `url` (`chattr`): nothing can be made inside an
    /// immutable folder, not even by root.
    private func setImmutable(_ immutable: Bool, _ url: URL) throws {
        let chattr = TestProcess()
        chattr.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        chattr.arguments = [immutable ? "+i" : "-i", url.path]
        try chattr.run()
        chattr.waitUntilExit()
        try #require(chattr.terminationStatus == 0, "chattr needs a file system with the immutable attribute (ext4)")
    }

    @Test func aFolderTheReplicaCannotMakeIsSkippedWithItsItemsAndMadeByTheNextSync() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a/x.txt", data: Data("x".utf8))
            try f.memory.write(path: "b/y.txt", data: Data("y".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(tree(at: controller.replica.root) == ["a/", "a/x.txt.placeholder", "b/", "b/y.txt.placeholder"])

            // New folders in both populated folders; `a` cannot take one.
            try f.memory.write(path: "a/new/deep/z.txt", data: Data("z".utf8))
            try f.memory.write(path: "a/new/w.txt", data: Data("w".utf8))
            try f.memory.write(path: "b/other/v.txt", data: Data("v".utf8))
            let a = f.url(controller, "a")
            try setImmutable(true, a)
            var report: SyncReport
            do {
                report = try await controller.sync()
                try setImmutable(false, a)
            } catch {
                try? setImmutable(false, a)
                throw error
            }
            #expect(report.notices.contains { $0.contains("a/new") && $0.contains("cannot create folder") }, "\(report.notices)")
            await expectCode(.noSuchItem) { try controller.record(at: "a/new") }
            await expectCode(.noSuchItem) { try controller.record(at: "a/new/w.txt") }
            await expectCode(.noSuchItem) { try controller.record(at: "a/new/deep") }
            // The other folder went on: made, recorded, its items placed.
            #expect(try controller.record(at: "b/other").localInode != nil)
            #expect(try controller.record(at: "b/other/v.txt").state == .placeholder)
            #expect(entry(at: f.placeholderURL(controller, "b/other/v.txt")) == .file)

            // `a` can take it now: its listing is compared again (no digest was kept for it)
            // and the folder made, with what is in it.
            report = try await controller.sync()
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(entry(at: f.url(controller, "a/new")) == .folder)
            #expect(try controller.record(at: "a/new").localInode != nil)
            #expect(try controller.record(at: "a/new/w.txt").state == .placeholder)
            #expect(try controller.record(at: "a/new/deep/z.txt").state == .placeholder)
        }
    }
}
