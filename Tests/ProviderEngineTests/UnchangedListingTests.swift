import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

/// A walk skips reading and comparing a folder whose listing is the one its rows were last made
/// to match (``ListingDigest``): a re-sync of an unchanged store reads only folders, and
/// whatever changed (in the store, or in the database behind the walk's back) is still seen.
@Suite struct UnchangedListingTests {
    /// Folders a, a/b and c with two files each, and a file in the root: 4 folders with the root.
    static func syncedTwice(_ f: Fixture) async throws -> DomainController {
        for path in ["a/one.txt", "a/two.txt", "a/b/three.txt", "a/b/four.txt", "c/five.txt", "c/six.txt", "top.txt"] {
            _ = try f.memory.write(path: path, data: Data(path.utf8))
        }
        let controller = try await f.addDomain()
        let first = try await controller.sync()
        #expect(first.unchangedFolders == 0 && first.added == 10, "\(first)")
        return controller
    }

    static func rows(_ controller: DomainController) throws -> [String] {
        try controller.store.descendants(domainID: controller.domainID, of: "").map {
            "\($0.path) \($0.parentIdentifier.rawValue) \($0.version.content.base64EncodedString()) \($0.state.rawValue)"
        }
    }

    @Test func aSecondSyncOfAnUnchangedStoreComparesNoFolder() async throws {
        try await Fixture.with { f in
            let controller = try await Self.syncedTwice(f)
            let before = try Self.rows(controller)
            let again = try await controller.sync()
            #expect(again.unchangedFolders == 4, "\(again)")
            #expect(again.listedItems == 10 && again.added == 0 && again.updated == 0 && again.deleted == 0, "\(again)")
            #expect(try Self.rows(controller) == before)
        }
    }

    @Test func changesInTheStoreAreSeenInTheFoldersThatHoldThem() async throws {
        try await Fixture.with { f in
            let controller = try await Self.syncedTwice(f)
            _ = try f.memory.write(path: "a/b/three.txt", data: Data("changed".utf8))
            try f.memory.remove(path: "c/six.txt")
            _ = try f.memory.write(path: "c/seven.txt", data: Data("new".utf8))
            let report = try await controller.sync()
            #expect(report.updated == 1 && report.deleted == 1 && report.added == 1, "\(report)")
            #expect(report.unchangedFolders <= 2, "a/b and c were compared: \(report)")
            let store = controller.store
            let changed = try #require(try store.item(domainID: controller.domainID, path: "a/b/three.txt"))
            #expect(changed.version == (try await f.memory.item(for: "a/b/three.txt")).version)
            #expect(try store.item(domainID: controller.domainID, path: "c/six.txt") == nil)
            #expect(try store.item(domainID: controller.domainID, path: "c/seven.txt") != nil)
            // a/b is kept again at once; c once the deletion is settled (it drops c's digest
            // after the walk): the next sync compares c, the one after it nothing.
            #expect(try await controller.sync().unchangedFolders == 3)
            #expect(try await controller.sync().unchangedFolders == 4)
        }
    }

    /// A row changed behind the walk (here a version the store never had) drops its folder's
    /// digest: the next sync compares that folder and puts the store's version back.
    @Test func aRowChangedBehindTheWalkIsComparedAgain() async throws {
        try await Fixture.with { f in
            let controller = try await Self.syncedTwice(f)
            let (store, id) = (controller.store, controller.domainID)
            #expect(try store.listingDigest(domainID: id, folder: "c") != nil)
            var row = try #require(try store.item(domainID: id, path: "c/five.txt"))
            let right = row.version
            row.contentVersion = Data("bogus".utf8)
            try store.apply(domainID: id, upserts: [row], deletions: [])
            #expect(try store.listingDigest(domainID: id, folder: "c") == nil)
            #expect(try store.listingDigest(domainID: id, folder: "a") != nil)
            let report = try await controller.sync()
            #expect(report.unchangedFolders == 3 && report.updated == 1, "\(report)")
            #expect(try store.item(domainID: id, path: "c/five.txt")?.version == right)
        }
    }

    /// A folder the store lists with an entry the walk leaves aside is compared every time, so
    /// the notice is given every time; the others are not.
    @Test func aFolderWithASkippedEntryIsNeverKept() async throws {
        try await Fixture.with { f in
            let controller = try await Self.syncedTwice(f)
            f.remote.inject([Item(identifier: "evil", parentIdentifier: "c", filename: "../up", kind: .file, size: 1)], into: "c")
            for _ in 0..<2 {
                let report = try await controller.sync()
                #expect(report.notices.contains { $0.contains("skipped an item") }, "\(report.notices)")
                #expect(report.unchangedFolders == 3, "\(report)")
            }
        }
    }

    /// The digest covers each entry's identifier, name, kind, size, versions and symlink
    /// target, and the folder's own state: changing any of them changes it.
    @Test func theDigestChangesWithEveryValueTheWalkUses() throws {
        let file = Item(
            identifier: "x", parentIdentifier: .rootContainer, filename: "x.txt", kind: .file, size: 3,
            version: ItemVersion(content: Data([1]), metadata: Data([2])))
        var variants: [Item] = []
        for change in 0..<8 {
            var item = file
            switch change {
            case 0: item.identifier = "y"
            case 1: item.filename = "y.txt"
            case 2: item.kind = .symlink
            case 3: item.size = 4
            case 4: item.version.content = Data([9])
            case 5: item.version.metadata = Data([9])
            case 6: item.fileSystemFlags.insert(.userExecutable)
            default: item.symlinkTargetPath = "t"
            }
            variants.append(item)
        }
        let folder = ItemRecord(
            domainID: 1, item: Item(identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "", kind: .folder), path: "")
        func digest(_ items: [Item], folder: ItemRecord = folder, ancestors: [ItemIdentifier] = [], rootLength: Int = 10) -> Data {
            ListingDigest.seal(
                ListingDigest.entries(of: ItemListing(items: items)), folder: folder, ancestors: ancestors, rootLength: rootLength)
        }
        let base = digest([file])
        #expect(base == digest([file]))
        #expect(base.count == 16)
        var seen: Set<Data> = [base]
        for variant in variants { #expect(seen.insert(digest([variant])).inserted, "\(variant)") }
        var dataless = folder
        dataless.isDataless = true
        for other in [
            digest([file], folder: dataless), digest([file], ancestors: ["p"]), digest([file], rootLength: 11), digest([]),
            digest([file, file]),
            ListingDigest.seal(
                ListingDigest.entries(of: ItemListing(items: [file], refused: [RefusedItem(identifier: nil, filename: "r", reason: "m")])),
                folder: folder, ancestors: [], rootLength: 10),
        ] {
            #expect(seen.insert(other).inserted)
        }
    }
}

/// During a domain's first sync a new folder's record goes to the database with its own
/// listing (``PullPass/defersFolderRecords``), and its parent's digest waits for it.
@Suite struct DeferredFolderRecordTests {
    @Test func aSubfolderNotListedInAFirstSyncIsStillRecordedAndTheNextSyncListsIt() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a/f.txt", data: Data("f".utf8))
            _ = try f.memory.write(path: "a/b/g.txt", data: Data("g".utf8))
            let b = try await f.memory.item(for: "a/b").identifier
            let a = try await f.memory.item(for: "a").identifier
            let memory = f.memory
            // Only a/b's listing fails, once: nothing else is listed while it is.
            memory.setHook(for: .enumerateItems) { identifier in
                if identifier == b {
                    memory.setFailure(FileProviderError(.cannotSynchronize, "a/b is not there today"), for: .enumerateItems, times: 1)
                }
            }
            let controller = try await f.addDomain()
            let first = try await controller.sync()
            memory.setHook(for: .enumerateItems, nil)
            let store = controller.store
            let id = controller.domainID
            #expect(first.notices.contains { $0.contains("a/b") }, "\(first)")
            let recorded = try #require(try store.item(domainID: id, path: "a/b"), "the folder not listed was not recorded")
            #expect(recorded.kind == .folder && recorded.identifier == b)
            #expect(try store.item(domainID: id, path: "a/f.txt") != nil)
            #expect(try store.item(domainID: id, path: "a/b/g.txt") == nil)
            // a's rows match its listing once a/b's record is written: its digest is kept.
            #expect(try store.listingDigest(domainID: id, folder: a) != nil)
            #expect(try store.listingDigest(domainID: id, folder: b) == nil)

            let second = try await controller.sync()
            #expect(second.added == 1, "\(second)")
            #expect(try store.item(domainID: id, path: "a/b/g.txt") != nil)
            #expect(try store.listingDigest(domainID: id, folder: b) != nil)
        }
    }

    /// A first sync writes each new folder's row once, and every folder's digest (the root's,
    /// and those of folders that hold folders) ends up kept: a second sync compares nothing.
    @Test func aFirstSyncKeepsEveryDigestAndOneRowPerFolder() async throws {
        try await Fixture.with { f in
            for path in ["x/y/z/deep.txt", "x/y/mid.txt", "x/top.txt", "w/v/u.txt", "root.txt"] {
                _ = try f.memory.write(path: path, data: Data(path.utf8))
            }
            let controller = try await f.addDomain()
            let first = try await controller.sync()
            #expect(first.added == 10, "\(first)")
            let folders = try controller.store.descendants(domainID: controller.domainID, of: "").filter { $0.kind == .folder }
            #expect(folders.map(\.path) == ["w", "w/v", "x", "x/y", "x/y/z"])
            let again = try await controller.sync()
            #expect(again.unchangedFolders == 6 && again.added == 0 && again.updated == 0, "\(again)")
        }
    }
}
