import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Each operation of the ``ReplicaLayout`` seam, on a temporary folder, for every layout the
/// factory makes: what both must do alike (one check, run for each), and where they differ.
@Suite struct ReplicaLayoutTests {
    /// A temporary replica folder in one layout (dataless unless told), removed at the end.
    final class Folder {
        let url: URL
        let replica: Replica
        var layout: any ReplicaLayout { replica.layout }
        init(_ mode: ReplicaMode = .dataless) throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-layout-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url.appendingPathComponent("staging"), withIntermediateDirectories: true)
            replica = Replica(root: url, staging: url.appendingPathComponent("staging"), layout: ReplicaLayouts.layout(for: mode))
        }
        deinit { try? FileManager.default.removeItem(at: url) }

        /// The names in the folder `relative` (the staging folder left out), sorted.
        func names(_ relative: String = "") throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: replica.path(relative)).filter { $0 != "staging" }.sorted()
        }

        func write(_ text: String, at relative: String) throws { try Data(text.utf8).write(to: replica.url(relative)) }
        func read(_ relative: String) throws -> String { String(decoding: try Data(contentsOf: replica.url(relative)), as: UTF8.self) }
    }

    static func metadata(_ path: String, size: Int64 = 5, domain: String = "d") -> PlaceholderMetadata {
        let name = String(path.split(separator: "/").last ?? "")
        var record = ItemRecord(
            domainID: 1,
            item: Item(
                identifier: ItemIdentifier("id-" + path), parentIdentifier: .rootContainer, filename: name, kind: .file,
                size: size, contentModificationDate: Date(timeIntervalSince1970: 1_700_000_000)),
            path: path)
        record.state = .placeholder
        return PlaceholderMetadata(domain: domain, record: record)
    }

    // MARK: The factory

    @Test(arguments: ReplicaMode.allCases) func theFactoryPicksTheLayoutOfTheMode(_ mode: ReplicaMode) {
        #expect(ReplicaLayouts.layout(for: mode).mode == mode)
        var record = DomainRecord(name: "d", backendKind: "memory", configuration: [:], replicaPath: "/tmp/d")
        record.replicaMode = mode
        #expect(ReplicaLayouts.layout(of: record).mode == mode)
        var other = record
        other.replicaMode = mode == .dataless ? .placeholderFiles : .dataless
        #expect(ReplicaLayouts.differ(record, other) && !ReplicaLayouts.differ(record, record))
        // A conversion reads with the record's layout; one recorded already (a rerun), with the other.
        #expect(ReplicaLayouts.conversionSource(of: record, to: ReplicaLayouts.layout(for: other.replicaMode)).mode == mode)
        #expect(ReplicaLayouts.conversionSource(of: record, to: ReplicaLayouts.layout(for: mode)).mode == other.replicaMode)
    }

    /// A dataless domain's on-access mechanism picks fanotify's layout or FUSE's; a conversion's
    /// rerun check sees the change of mechanism as a change of layout.
    @Test func theOnAccessMechanismPicksTheDatalessLayout() {
        var record = DomainRecord(name: "d", backendKind: "memory", configuration: [:], replicaPath: "/tmp/d")
        record.replicaMode = .dataless
        #expect(ReplicaLayouts.layout(of: record).isGuardedOnAccess && !ReplicaLayouts.layout(of: record).mountsThroughFUSE)
        var fuse = record
        fuse.onAccess = .fuse
        #expect(ReplicaLayouts.layout(of: fuse) is FUSELayout && ReplicaLayouts.layout(of: fuse).mode == .dataless)
        #expect(ReplicaLayouts.differ(record, fuse))
        var files = fuse
        files.replicaMode = .placeholderFiles
        #expect(ReplicaLayouts.layout(of: files) is PlaceholderFilesLayout)
    }

    @Test func theTraitsOfEachLayout() {
        let files = PlaceholderFilesLayout()
        #expect(!files.placeholderTakesItemsName && !files.writesAtAnItemsNameEditIt && !files.keepsPartialContents)
        #expect(!files.keepsFilesInBackingFolder && !files.isGuardedOnAccess && files.canAdoptReplicaFolder)
        #expect(files.defaultHydration == .full)
        let dataless = DatalessLayout()
        #expect(dataless.placeholderTakesItemsName && dataless.writesAtAnItemsNameEditIt && dataless.keepsPartialContents)
        #expect(dataless.keepsFilesInBackingFolder && dataless.isGuardedOnAccess && !dataless.canAdoptReplicaFolder)
        #expect(dataless.defaultHydration == .progressive)
        #expect(!files.mountsThroughFUSE && !dataless.mountsThroughFUSE)
        // FUSE: the dataless files in the backing folder, served through a FUSE mount, not fanotify.
        let fuse = FUSELayout()
        #expect(fuse.placeholderTakesItemsName && fuse.writesAtAnItemsNameEditIt && fuse.keepsPartialContents)
        #expect(fuse.keepsFilesInBackingFolder && !fuse.isGuardedOnAccess && fuse.mountsThroughFUSE && !fuse.canAdoptReplicaFolder)
        #expect(fuse.defaultHydration == .progressive && fuse.mode == .dataless)
        #expect(!fuse.explainNotDownloaded(present: 0, size: 10, display: "'d:/a'", replicaPath: "/r").contains("zeros"))
    }

    // MARK: Not-downloaded items

    @Test(arguments: ReplicaMode.allCases) func aPlaceholderIsWrittenReadAndRewritten(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let replica = f.replica
        try replica.createPlaceholder("a.txt", Self.metadata("a.txt", size: 5))
        #expect(replica.placeholderExists("a.txt"))
        #expect(replica.isPlaceholder(of: "id-a.txt", at: "a.txt") && !replica.isPlaceholder(of: "id-b.txt", at: "a.txt"))
        #expect(replica.placeholderOwner("a.txt")?.isOwned(by: "id-a.txt") == true)
        #expect(!replica.placeholderExists("b.txt") && replica.placeholderOwner("b.txt") == nil)
        let location = replica.placeholderLocation("a.txt")
        #expect(replica.fingerprint(atPath: location)?.isRegularFile == true)
        // Created again (an interrupted sync): replaced, never doubled, no temporary left.
        try replica.createPlaceholder("a.txt", Self.metadata("a.txt", size: 9))
        try replica.writePlaceholder("a.txt", Self.metadata("a.txt", size: 7))
        #expect(try f.names() == [(location as NSString).lastPathComponent])
        switch mode {
        case .placeholderFiles:
            #expect(location == replica.path("a.txt") + Replica.placeholderSuffix)
            #expect(replica.fingerprint(atPath: replica.path("a.txt")) == nil, "the real name stays free")
            #expect(try replica.readPlaceholder("a.txt").size == 7)
            #expect(replica.placeholderUnderItsName("a.txt") == nil)
        case .dataless:
            #expect(location == replica.path("a.txt"))
            #expect(replica.fingerprint(atPath: location)?.size == 7, "the item's size, under its own name")
            #expect(replica.placeholderUnderItsName("a.txt")?.isOwned(by: "id-a.txt") == true)
        }
    }

    @Test(arguments: ReplicaMode.allCases) func aFileWithContentsIsNeverAPlaceholder(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let replica = f.replica
        try f.write("mine", at: "a.txt")
        #expect(!replica.placeholderExists("a.txt") && replica.placeholderUnderItsName("a.txt") == nil)
        try replica.removePlaceholder("a.txt")
        #expect(try f.read("a.txt") == "mine", "removing a placeholder never removes contents")
        switch mode {
        case .placeholderFiles:
            // The placeholder stands beside it: the file is a local file, the placeholder the item.
            try replica.createPlaceholder("a.txt", Self.metadata("a.txt"))
            #expect(try f.names() == ["a.txt", "a.txt.placeholder"])
        case .dataless:
            #expect(throws: FileProviderError.self) { try replica.createPlaceholder("a.txt", Self.metadata("a.txt")) }
            #expect(throws: FileProviderError.self) { try replica.writePlaceholder("a.txt", Self.metadata("a.txt")) }
        }
        #expect(try f.read("a.txt") == "mine")
    }

    @Test(arguments: ReplicaMode.allCases) func aPlaceholderMovesAndIsRemoved(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let replica = f.replica
        try replica.createPlaceholder("a.txt", Self.metadata("a.txt"))
        try replica.createPlaceholder("b.txt", Self.metadata("b.txt"))
        try replica.movePlaceholder(from: "a.txt", to: "c.txt")
        #expect(!replica.placeholderExists("a.txt") && replica.isPlaceholder(of: "id-a.txt", at: "c.txt"))
        let taken = #expect(throws: FileProviderError.self) { try replica.movePlaceholder(from: "c.txt", to: "b.txt") }
        #expect(taken?.code == .filenameCollision)
        #expect(replica.isPlaceholder(of: "id-b.txt", at: "b.txt"), "a move never replaces")
        let none = #expect(throws: FileProviderError.self) { try replica.movePlaceholder(from: "gone.txt", to: "d.txt") }
        #expect(none != nil)
        try replica.removePlaceholder("c.txt")
        try replica.removePlaceholder("c.txt")
        #expect(!replica.placeholderExists("c.txt"))
        #expect(try f.names() == [(replica.placeholderLocation("b.txt") as NSString).lastPathComponent])
    }

    @Test(arguments: ReplicaMode.allCases) func theNamesOfPlaceholdersInAFolder(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let replica = f.replica
        try replica.makeFolder("sub")
        for name in ["a.txt", "b.txt"] { try replica.createPlaceholder("sub/" + name, Self.metadata("sub/" + name)) }
        try f.write("x", at: "sub/c.txt")
        let names = replica.placeholderNames(in: "sub", limit: 100)
        let entry = (replica.placeholderLocation("sub/a.txt") as NSString).lastPathComponent
        let item = replica.layout.itemName(ofPlaceholderEntry: entry, in: "sub", in: replica)
        switch mode {
        case .placeholderFiles:
            #expect(names == ["a.txt", "b.txt"])
            #expect(replica.placeholderNames(in: "sub", limit: 2) == nil, "more entries than the limit: asked name by name")
            #expect(item == "a.txt")
        case .dataless:
            #expect(names == nil, "a dataless file is told by its mark, name by name")
            #expect(item == nil, "a dataless file has its item's name")
        }
        #expect(replica.layout.itemName(ofPlaceholderEntry: "c.txt", in: "sub", in: replica) == nil)
    }

    @Test(arguments: ReplicaMode.allCases) func removingEveryPlaceholderOfADomainKeepsTheRest(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let replica = f.replica
        try replica.makeFolder("sub")
        try replica.createPlaceholder("a.txt", Self.metadata("a.txt"))
        try replica.createPlaceholder("sub/b.txt", Self.metadata("sub/b.txt"))
        try replica.createPlaceholder("other.txt", Self.metadata("other.txt", domain: "other"))
        try f.write("mine", at: "sub/c.txt")
        replica.removeAllPlaceholders(of: "d")
        #expect(!replica.placeholderExists("a.txt") && !replica.placeholderExists("sub/b.txt"))
        #expect(try f.read("sub/c.txt") == "mine")
        switch mode {
        case .placeholderFiles:
            #expect(replica.placeholderExists("other.txt"), "another domain's placeholder file is kept")
        case .dataless:
            #expect(!replica.placeholderExists("other.txt"), "every dataless file goes: it would read as zeros")
        }
    }

    // MARK: Contents

    @Test(arguments: ReplicaMode.allCases) func aDownloadTakesThePlaceholdersPlace(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let replica = f.replica
        try replica.createPlaceholder("a.txt", Self.metadata("a.txt", size: 4))
        let staged = replica.staging.path + "/a.part"
        try Data("data".utf8).write(to: URL(fileURLWithPath: staged))
        try replica.placeFile(fromPath: staged, at: "a.txt")
        #expect(try f.read("a.txt") == "data" && !replica.placeholderExists("a.txt"))
        #expect(try f.names() == ["a.txt"])
        #expect(replica.fingerprint(atPath: staged) == nil)
        // Never over a file with contents.
        try Data("other".utf8).write(to: URL(fileURLWithPath: staged))
        let refused = #expect(throws: FileProviderError.self) { try replica.placeFile(fromPath: staged, at: "a.txt") }
        #expect(refused?.code == .filenameCollision)
        #expect(try f.read("a.txt") == "data")
    }

    @Test(arguments: ReplicaMode.allCases) func anEvictionSwapsTheFileForItsPlaceholder(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let replica = f.replica
        try f.write("hello", at: "a.txt")
        try replica.replaceWithPlaceholder("a.txt", Self.metadata("a.txt", size: 5))
        #expect(replica.isPlaceholder(of: "id-a.txt", at: "a.txt"))
        #expect(try f.names() == [(replica.placeholderLocation("a.txt") as NSString).lastPathComponent])
        if mode == .dataless {
            var info = stat()
            #expect(lstat(replica.path("a.txt"), &info) == 0 && info.st_size == 5 && info.st_blocks <= 8, "no contents kept")
        }
    }

    // MARK: Conversion

    /// A placeholder read with one layout and written with the other.
    @Test(arguments: ReplicaMode.allCases) func aPlaceholderIsConvertedToTheOtherLayout(_ mode: ReplicaMode) throws {
        let f = try Folder(mode)
        let old = f.replica
        let new = Replica(
            root: f.url, staging: old.staging, layout: ReplicaLayouts.layout(for: mode == .dataless ? .placeholderFiles : .dataless))
        try old.createPlaceholder("a.txt", Self.metadata("a.txt", size: 5))
        let entry = (old.placeholderLocation("a.txt") as NSString).lastPathComponent
        let found = try #require(old.layout.convertiblePlaceholder(named: entry, in: "", in: old))
        #expect(found.itemPath == "a.txt" && found.owner.isOwned(by: "id-a.txt"))
        #expect(old.layout.isPlaceholderEntry(named: entry, in: "", in: old))
        #expect(!new.layout.isPlaceholderEntry(named: entry, in: "", in: new))
        // A dataless file carries only its item's key: the database gives the metadata.
        #expect((found.metadata != nil) == (mode == .placeholderFiles))
        let metadata = found.metadata ?? Self.metadata("a.txt", size: 5)
        #expect(try new.layout.writeConvertedPlaceholder("a.txt", metadata, key: found.owner.identifierKey, in: new))
        try old.removePlaceholder("a.txt")
        #expect(new.isPlaceholder(of: "id-a.txt", at: "a.txt") && !old.placeholderExists("a.txt"))
        #expect(try f.names() == [(new.placeholderLocation("a.txt") as NSString).lastPathComponent])
        // A file with contents is no placeholder of either.
        try f.write("mine", at: "b.txt")
        #expect(old.layout.convertiblePlaceholder(named: "b.txt", in: "", in: old) == nil)
        #expect(!old.layout.isPlaceholderEntry(named: "b.txt", in: "", in: old))
    }

    @Test func whatIsInTheWayOfAConvertedPlaceholder() throws {
        // Dataless: a file with contents keeps its name; nothing is written.
        let dataless = try Folder(.dataless)
        try dataless.write("mine", at: "a.txt")
        let metadata = Self.metadata("a.txt")
        let key = PlaceholderOwner.key(metadata.identifier)
        #expect(try !dataless.layout.writeConvertedPlaceholder("a.txt", metadata, key: key, in: dataless.replica))
        #expect(try dataless.read("a.txt") == "mine")
        // Placeholder files: a `.placeholder` file that is not the item's is never overwritten.
        let files = try Folder(.placeholderFiles)
        try files.write("not a placeholder", at: "a.txt.placeholder")
        let refused = #expect(throws: FileProviderError.self) {
            try files.layout.writeConvertedPlaceholder("a.txt", metadata, key: key, in: files.replica)
        }
        #expect(refused?.code == .filenameCollision)
        #expect(try files.read("a.txt.placeholder") == "not a placeholder")
        // The item's own (from an interrupted run) is written again.
        try files.replica.writePlaceholder("b.txt", Self.metadata("b.txt"))
        let own = Self.metadata("b.txt", size: 11)
        #expect(try files.layout.writeConvertedPlaceholder("b.txt", own, key: PlaceholderOwner.key(own.identifier), in: files.replica))
        #expect(try files.replica.readPlaceholder("b.txt").size == 11)
    }

    // MARK: What commands show

    @Test func whyExplainsANotDownloadedFileInTheLayoutsTerms() {
        let files = PlaceholderFilesLayout().explainNotDownloaded(present: 0, size: 10, display: "'d:/a'", replicaPath: "/r")
        #expect(files.hasPrefix("placeholder: the contents are not downloaded"))
        let dataless = DatalessLayout()
        #expect(
            dataless.explainNotDownloaded(present: 0, size: 10, display: "'d:/a'", replicaPath: "/r").hasPrefix(
                "dataless: under its real name"))
        let partly = dataless.explainNotDownloaded(present: 4, size: 10, display: "'d:/a'", replicaPath: "/r")
        #expect(partly.hasPrefix("partly fetched: 4 of 10 bytes are on disk") && partly.contains("/r"))
    }
}
