import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Sync down from a change feed: after the first sync (a walk, which stores the anchor), syncs
/// ask the store what changed since the anchor instead of listing it.
@Suite struct ChangeFeedTests {
    /// A memory store with a change feed that hands out 3 log entries at a time.
    private static func feed() -> MemoryBackend { MemoryBackend(hasChangeFeed: true, pageSize: 7, changeBatchSize: 3) }

    private func anchor(_ f: Fixture, _ controller: DomainController) throws -> SyncAnchor? {
        try f.manager.store.syncAnchor(domainID: controller.domainID, container: .workingSet)
    }

    @Test func laterSyncsFollowTheFeedWithoutListing() async throws {
        try await Fixture.with(memory: Self.feed()) { f in
            try f.memory.write(path: "docs/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "docs/b.txt", data: Data("b".utf8))
            try f.memory.write(path: "old/inside/c.txt", data: Data("c".utf8))
            try f.memory.write(path: "top.txt", data: Data("top".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(try anchor(f, controller) != nil, "a walk stores the feed's anchor")
            #expect(codes(await controller.materialize(paths: ["docs/a.txt"], recursive: false)) == [nil])
            let listings = f.memory.callCount(.enumerateItems)

            try f.memory.write(path: "docs/a.txt", data: Data("a, edited".utf8))
            try f.memory.write(path: "docs/new.txt", data: Data("new".utf8))
            try f.memory.write(path: "fresh/deep/d.txt", data: Data("d".utf8))
            try f.memory.remove(path: "docs/b.txt")
            try f.memory.remove(path: "old")
            let report = try await controller.sync()
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(f.memory.callCount(.enumerateItems) == listings, "the feed made a listing unnecessary")
            #expect(report.added == 4 && report.updated == 1 && report.downloaded == 1, "\(report)")
            #expect(
                tree(at: controller.replica.root) == [
                    "docs/", "docs/a.txt", "docs/new.txt.placeholder", "fresh/", "fresh/deep/", "fresh/deep/d.txt.placeholder",
                    "top.txt.placeholder",
                ])
            #expect(try Data(contentsOf: f.url(controller, "docs/a.txt")) == Data("a, edited".utf8))
            await expectCode(.noSuchItem) { try controller.record(at: "old/inside/c.txt") }
            #expect(try controller.list(at: "", recursive: true).count == 7)

            // Nothing changed: nothing to do.
            let quiet = try await controller.sync()
            #expect(quiet.added == 0 && quiet.updated == 0 && quiet.deleted == 0 && quiet.moved == 0)
            #expect(f.memory.callCount(.enumerateItems) == listings)
        }
    }

    @Test func aOneShotSyncStartsNoFeedThatDiesWithTheProcess() async throws {
        // A store whose anchors do not outlive the process (the local store's inotify feed).
        try await Fixture.with(memory: MemoryBackend(hasChangeFeed: true, pageSize: 7, anchorsOutliveProcess: false)) { f in
            try f.memory.write(path: "docs/a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            let first = try await controller.sync(followChanges: false)
            #expect(first.added == 2, "\(first)")
            #expect(f.memory.callCount(.currentSyncAnchor) == 0, "no anchor asked for: nothing could use it")
            #expect(try anchor(f, controller) == nil)

            // A sync whose process syncs again (serve) takes one, and the next follows the feed.
            try await controller.sync()
            #expect(f.memory.callCount(.currentSyncAnchor) == 1)
            #expect(try anchor(f, controller) != nil)
            let listings = f.memory.callCount(.enumerateItems)
            try f.memory.write(path: "docs/b.txt", data: Data("b".utf8))
            let next = try await controller.sync(followChanges: false)
            #expect(next.added == 1, "\(next)")
            #expect(f.memory.callCount(.enumerateItems) == listings, "the anchor this process holds is followed")
        }
        // A store that keeps its feed is asked for an anchor by a one-shot sync too.
        try await Fixture.with(memory: Self.feed()) { f in
            try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            try await controller.sync(followChanges: false)
            #expect(f.memory.callCount(.currentSyncAnchor) == 1)
            #expect(try anchor(f, controller) != nil)
        }
    }

    @Test func aRemoteMoveKeepsTheDownloadedFile() async throws {
        try await Fixture.with(memory: Self.feed()) { f in
            try f.memory.write(path: "a/x.bin", data: bytes(5000, seed: 3))
            try f.memory.write(path: "a/y.txt", data: Data("y".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["a/x.bin"], recursive: false)) == [nil])
            let fetches = f.memory.callCount(.fetchContents)
            try f.memory.rename(from: "a", to: "b")
            let report = try await controller.sync()
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(f.memory.callCount(.fetchContents) == fetches, "a moved download is not downloaded again")
            #expect(tree(at: controller.replica.root) == ["b/", "b/x.bin", "b/y.txt.placeholder"])
            #expect(try controller.record(at: "b/x.bin").state == .materialized)
            #expect(try Data(contentsOf: f.url(controller, "b/x.bin")) == bytes(5000, seed: 3))
        }
    }

    @Test func anExpiredAnchorListsTheWholeStore() async throws {
        try await Fixture.with(memory: Self.feed()) { f in
            try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try f.memory.write(path: "b.txt", data: Data("b".utf8))
            f.memory.expireAnchors()
            let listings = f.memory.callCount(.enumerateItems)
            let report = try await controller.sync()
            #expect(report.notices.contains { $0.contains("listing the whole store") }, "\(report.notices)")
            #expect(f.memory.callCount(.enumerateItems) > listings)
            #expect(tree(at: controller.replica.root) == ["a.txt.placeholder", "b.txt.placeholder"])
            // The walk stored a fresh anchor: the next sync follows the feed again.
            try f.memory.write(path: "c.txt", data: Data("c".utf8))
            let after = f.memory.callCount(.enumerateItems)
            try await controller.sync()
            #expect(f.memory.callCount(.enumerateItems) == after)
            #expect(tree(at: controller.replica.root).contains("c.txt.placeholder"))
        }
    }

    @Test func changesInsideADatalessFolderReachOnlyTheDatabase() async throws {
        try await Fixture.with(memory: Self.feed()) { f in
            try f.memory.write(path: "far/away.txt", data: Data("x".utf8))
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 0)
            try f.memory.write(path: "far/new.txt", data: Data("new".utf8))
            try f.memory.write(path: "far/sub/deeper.txt", data: Data("d".utf8))
            try await controller.sync(populationBudget: 0)
            #expect(tree(at: controller.replica.root) == ["far/"])
            #expect(
                try controller.list(at: "far", recursive: true).map(\.path) == [
                    "far/away.txt", "far/new.txt", "far/sub", "far/sub/deeper.txt",
                ])
            #expect(try controller.record(at: "far/sub").isDataless)
            // Populated later, it shows everything the feed brought.
            #expect(codes(await controller.populate(paths: ["far"], recursive: true)) == [nil])
            #expect(tree(at: controller.replica.root).contains("far/sub/deeper.txt.placeholder"))
        }
    }

    @Test func whatTheEngineForgetsComesBackWithAListing() async throws {
        try await Fixture.with(memory: Self.feed()) { f in
            try f.memory.write(path: "c/z.txt", data: Data("store z".utf8))
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 0)
            // The user deletes a dataless folder: the store keeps what the user never saw, and
            // the feed has nothing to say about it; the next sync down lists the store.
            try FileManager.default.removeItem(at: f.url(controller, "c"))
            try await controller.sync(populationBudget: 0)
            #expect(f.memory.contents(of: "c/z.txt") == Data("store z".utf8))
            #expect(entry(at: f.url(controller, "c")) == .folder)
            #expect(try controller.record(at: "c/z.txt").kind == .file)
            #expect(try anchor(f, controller) != nil)
        }
    }

    @Test func changesAppliedTwiceChangeNothingTheSecondTime() async throws {
        try await Fixture.with(memory: Self.feed()) { f in
            try f.memory.write(path: "a/one.txt", data: Data("1".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let before = try #require(try anchor(f, controller))
            try f.memory.write(path: "a/two.txt", data: Data("2".utf8))
            try f.memory.rename(from: "a/one.txt", to: "a/uno.txt")
            try f.memory.write(path: "b/three.txt", data: Data("3".utf8))
            try await controller.sync()
            let shown = tree(at: controller.replica.root)
            // As if the process died after applying the changes, before storing the new anchor.
            try f.manager.store.setSyncAnchor(before, domainID: controller.domainID, container: .workingSet)
            let again = try await controller.sync()
            #expect(again.added == 0 && again.updated == 0 && again.deleted == 0 && again.moved == 0, "\(again)")
            #expect(tree(at: controller.replica.root) == shown)
            #expect(shown == ["a/", "a/two.txt.placeholder", "a/uno.txt.placeholder", "b/", "b/three.txt.placeholder"])
        }
    }
}
