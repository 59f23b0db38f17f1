import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// Folders new to the replica beyond a sync's population budget stay dataless (Apple's dataless
/// directories): the database knows their items, the replica shows an empty folder, and the
/// items appear when the folder is populated.
@Suite struct DatalessFolderTests {
    /// a/x.txt, a/b/y.bin, c/z.txt and top.txt in the store; synced with no population budget.
    private func seeded(_ f: Fixture) async throws -> DomainController {
        try f.memory.write(path: "a/x.txt", data: Data("x".utf8))
        try f.memory.write(path: "a/b/y.bin", data: bytes(3000, seed: 7))
        try f.memory.write(path: "c/z.txt", data: Data("store z".utf8))
        try f.memory.write(path: "top.txt", data: Data("top".utf8))
        let controller = try await f.addDomain()
        let report = try await controller.sync(populationBudget: 0)
        #expect(report.added == 7)
        return controller
    }

    private func record(_ controller: DomainController, _ path: String) throws -> ItemRecord {
        try controller.record(at: path)
    }

    @Test func newFoldersBeyondTheBudgetStayDatalessButTheDatabaseKnowsEverything() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            #expect(tree(at: controller.replica.root) == ["a/", "c/", "top.txt.placeholder"])
            #expect(try record(controller, "a").isDataless)
            #expect(try record(controller, "a/b").isDataless)
            #expect(try record(controller, "c").isDataless)
            #expect(try !record(controller, "").isDataless)
            #expect(try controller.list(at: "", recursive: true).map(\.path) == ["a", "a/b", "a/b/y.bin", "a/x.txt", "c", "c/z.txt", "top.txt"])
            #expect(try controller.summary().datalessFolders == 3)

            // Changes inside dataless folders reach the database only.
            try f.memory.write(path: "a/x.txt", data: Data("x, edited".utf8))
            try f.memory.write(path: "a/new.txt", data: Data("new".utf8))
            try f.memory.remove(path: "c/z.txt")
            let report = try await controller.sync(populationBudget: 0)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(report.added == 1 && report.updated == 1 && report.deleted == 1)
            #expect(tree(at: controller.replica.root) == ["a/", "c/", "top.txt.placeholder"])
            #expect(try record(controller, "a/x.txt").size == 9)
            await expectCode(.noSuchItem) { try controller.record(at: "c/z.txt") }
        }
    }

    @Test func aBudgetPopulatesNewFoldersUntilItIsSpent() async throws {
        try await Fixture.with { f in
            for index in 0..<5 { try f.memory.write(path: "small/f\(index)", data: Data([UInt8(index)])) }
            for index in 0..<50 { try f.memory.write(path: "large/f\(index)", data: Data([UInt8(index)])) }
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 20)
            // The small folder fits, the large one does not: it stays dataless, whole.
            #expect(try !record(controller, "small").isDataless)
            #expect(try record(controller, "large").isDataless)
            let shown = tree(at: controller.replica.root)
            #expect(shown.filter { $0.hasPrefix("small/") }.count == 1 + 5)
            #expect(shown.filter { $0.hasPrefix("large/") } == ["large/"])
            // A folder the replica shows gets every new item, whatever the budget.
            for index in 5..<40 { try f.memory.write(path: "small/f\(index)", data: Data([UInt8(index)])) }
            try await controller.sync(populationBudget: 0)
            #expect(tree(at: controller.replica.root).filter { $0.hasPrefix("small/") }.count == 1 + 40)
        }
    }

    @Test func populateWritesPlaceholdersFromTheDatabaseOffline() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            // Offline: the store refuses everything; populating needs only the database.
            f.memory.setFailure(FileProviderError(.serverUnreachable, "offline"), for: .enumerateItems)
            f.memory.setFailure(FileProviderError(.serverUnreachable, "offline"), for: .item)
            #expect(codes(await controller.populate(paths: ["a"], recursive: false)) == [nil])
            #expect(tree(at: controller.replica.root) == ["a/", "a/b/", "a/x.txt.placeholder", "c/", "top.txt.placeholder"])
            #expect(try !record(controller, "a").isDataless)
            #expect(try record(controller, "a/b").isDataless)
            #expect(try placeholder(at: f.placeholderURL(controller, "a/x.txt")).identifier == record(controller, "a/x.txt").identifier.rawValue)
            // A path inside a dataless folder populates the folders above it.
            #expect(codes(await controller.populate(paths: ["c/z.txt"], recursive: false)) == [nil])
            #expect(tree(at: controller.replica.root).contains("c/z.txt.placeholder"))
            #expect(codes(await controller.populate(paths: [""], recursive: true)) == [nil])
            #expect(tree(at: controller.replica.root).contains("a/b/y.bin.placeholder"))
            #expect(try controller.summary().datalessFolders == 0)
            #expect(codes(await controller.populate(paths: ["nothing/here"], recursive: false)) == [.noSuchItem])
        }
    }

    @Test func materializingInsideADatalessFolderPopulatesTheFoldersAbove() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            #expect(codes(await controller.materialize(paths: ["a/b/y.bin"], recursive: false)) == [nil])
            #expect(try Data(contentsOf: f.url(controller, "a/b/y.bin")) == bytes(3000, seed: 7))
            #expect(tree(at: controller.replica.root) == ["a/", "a/b/", "a/b/y.bin", "a/x.txt.placeholder", "c/", "top.txt.placeholder"])
            #expect(try !record(controller, "a").isDataless && !record(controller, "a/b").isDataless)
            // Pinning a dataless folder populates and downloads everything below it.
            #expect(codes(await controller.pin(paths: ["c"])).allSatisfy { $0 == nil })
            #expect(try Data(contentsOf: f.url(controller, "c/z.txt")) == Data("store z".utf8))
        }
    }

    @Test func aRecursiveMaterializeWritesNoPlaceholderForWhatItDownloads() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            let root = controller.replica.root
            // Whenever a file is fetched, no placeholder of the files being downloaded exists yet.
            let seen = Recorder<Bool>()
            f.memory.setHook(for: .fetchContents) { _ in
                seen.add(["a/x.txt", "a/b/y.bin"].contains { FileManager.default.fileExists(atPath: root.path + "/" + $0 + ".placeholder") })
            }
            f.memory.setFailure(FileProviderError(.serverUnreachable, "gone for a moment"), for: .fetchContents, times: 1)
            let outcomes = await controller.materialize(paths: ["a"], recursive: true)
            #expect(codes(outcomes).filter { $0 != nil } == [.serverUnreachable])
            #expect(seen.values == [false, false])
            // The failed one got its placeholder afterwards, and the folders are populated.
            let files = tree(at: root).filter { $0.hasPrefix("a/") && !$0.hasSuffix("/") }
            #expect(files.count == 2 && files.filter { $0.hasSuffix(".placeholder") }.count == 1, "\(files)")
            #expect(try !record(controller, "a").isDataless && !record(controller, "a/b").isDataless)
            #expect(codes(await controller.materialize(paths: ["a"], recursive: true)) == [nil])
            #expect(try Data(contentsOf: f.url(controller, "a/b/y.bin")) == bytes(3000, seed: 7))
            #expect(try Data(contentsOf: f.url(controller, "a/x.txt")) == Data("x".utf8))
        }
    }

    @Test func aDownloadNotYetRecordedInADatalessFolderIsAdoptedNotMovedAside() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            // As if a recursive materialize renamed the download into place and died before it
            // recorded it: the store's bytes with the item's size and date.
            let z = try record(controller, "c/z.txt")
            let url = f.url(controller, "c/z.txt")
            try Data("store z".utf8).write(to: url)
            try controller.replica.setModificationDate(try #require(z.modificationDate), atPath: url.path)
            let report = try await controller.sync(populationBudget: 0)
            #expect(report.uploaded == 0 && report.conflicts == 0, "\(report)")
            #expect(try record(controller, "c/z.txt").state == .materialized)
            #expect(tree(at: controller.replica.root).filter { $0.hasPrefix("c/") } == ["c/", "c/z.txt"])
            #expect(f.memory.contents(of: "c/z 2.txt") == nil)
        }
    }

    @Test func aFileMadeInADatalessFolderIsKeptBesideTheStoresItems() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            // Without serve nobody populated "c": its user sees an empty folder and writes into it.
            try Data("mine".utf8).write(to: f.url(controller, "c/z.txt"))
            try Data("new".utf8).write(to: f.url(controller, "c/new.txt"))
            let report = try await controller.sync(populationBudget: 0)
            #expect(report.notices.isEmpty, "\(report.notices)")
            // Nothing was overwritten: the store's z.txt is intact, the local one was renamed.
            #expect(f.memory.contents(of: "c/z.txt") == Data("store z".utf8))
            #expect(f.memory.contents(of: "c/z 2.txt") == Data("mine".utf8))
            #expect(f.memory.contents(of: "c/new.txt") == Data("new".utf8))
            #expect(tree(at: controller.replica.root).filter { $0.hasPrefix("c/") } == ["c/", "c/new.txt", "c/z 2.txt", "c/z.txt.placeholder"])
            #expect(try f.manager.store.conflicts(domainID: controller.domainID).map(\.kind) == ["nameCollision"])
        }
    }

    @Test func deletingADatalessFolderNeverDeletesWhatItsUserDidNotSee() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            try FileManager.default.removeItem(at: f.url(controller, "c"))
            try await controller.sync(populationBudget: 0)
            // The store kept c/z.txt, so the folder comes back.
            #expect(f.memory.contents(of: "c/z.txt") == Data("store z".utf8))
            #expect(entry(at: f.url(controller, "c")) == .folder)
            #expect(try controller.record(at: "c/z.txt").kind == .file)
            // An emptied folder the user did see goes.
            try f.memory.remove(path: "c/z.txt")
            try await controller.sync(populationBudget: 0)
            #expect(codes(await controller.populate(paths: ["c"], recursive: false)) == [nil])
            try FileManager.default.removeItem(at: f.url(controller, "c"))
            try await controller.sync(populationBudget: 0)
            #expect(f.memory.allIdentifiers.map(\.rawValue) == ["a", "a/b", "a/b/y.bin", "a/x.txt", "top.txt"])
        }
    }

    @Test func aDownloadedFileMovedIntoADatalessFolderFollowsWithoutADownload() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            #expect(codes(await controller.materialize(paths: ["top.txt"], recursive: false)) == [nil])
            let fetches = f.memory.callCount(.fetchContents)
            try f.memory.rename(from: "top.txt", to: "a/b/top.txt")
            let report = try await controller.sync(populationBudget: 0)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(report.downloaded == 0)
            #expect(f.memory.callCount(.fetchContents) == fetches)
            #expect(try Data(contentsOf: f.url(controller, "a/b/top.txt")) == Data("top".utf8))
            #expect(try record(controller, "a/b/top.txt").state == .materialized)
            #expect(try !record(controller, "a").isDataless && !record(controller, "a/b").isDataless)
            #expect(entry(at: f.url(controller, "top.txt")) == .none)
        }
    }

    @Test func aPopulationInterruptedBeforeItWasRecordedIsFinishedByTheNextSync() async throws {
        try await Fixture.with { f in
            let controller = try await seeded(f)
            // As if a populate wrote one placeholder and the process died before the database
            // learned that the folder is populated.
            let metadata = PlaceholderMetadata(domain: "mem", record: try record(controller, "c/z.txt"))
            try controller.replica.writePlaceholder("c/z.txt", metadata)
            let report = try await controller.sync(populationBudget: 0)
            #expect(report.uploaded == 0 && report.conflicts == 0, "\(report)")
            #expect(try !record(controller, "c").isDataless)
            #expect(tree(at: controller.replica.root).filter { $0.hasPrefix("c/") } == ["c/", "c/z.txt.placeholder"])
            #expect(f.memory.contents(of: "c/z.txt") == Data("store z".utf8))
        }
    }
}
