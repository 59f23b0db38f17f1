import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// The adapter against media-server --compat, which behaves like the original media API: names
/// and sizes only, images only, no ETag, a 25 MiB upload limit, no rename.
@Suite("Original media API (media-server --compat)")
struct CompatTests {
    let server: MediaServer

    init() async throws { server = try await SharedServers.compat() }

    func backend(_ folder: String) async throws -> MediaBackend {
        try await MediaBackend(url: server.url, root: folder)
    }

    @Test func originalServerIsDetectedAndLimitsDeclared() async throws {
        let backend = try await backend(try server.makeFolder())
        #expect(backend.dialect == .original)
        let capabilities = backend.capabilities
        #expect(!capabilities.supportsServerSideMove)
        #expect(!capabilities.supportsConditionalWrites)
        #expect(capabilities.maximumUploadSize == 25 << 20)
        #expect(capabilities.listsOnlySomeFiles)
        #expect(capabilities.supportsRangedReads)
        await backend.close()
    }

    @Test func listingTellsFoldersFromImagesAndHidesOtherFiles() async throws {
        let folder = try server.makeFolder()
        let png = try Samples.png()
        try server.put("a.png", png, in: folder)
        try server.put("b.jpg", try Samples.jpeg(), in: folder)
        try server.put("notes.txt", Data("invisible".utf8), in: folder)
        try server.put("sub/c.png", png, in: folder)
        try FileManager.default.createDirectory(
            at: server.root.appendingPathComponent(folder).appendingPathComponent("album.png"), withIntermediateDirectories: true)
        let backend = try await backend(folder)
        let items = try await backend.enumerateAllItems(in: .rootContainer)
        #expect(items.map(\.filename) == ["a.png", "album.png", "b.jpg", "sub"])
        let kinds = Dictionary(uniqueKeysWithValues: items.map { ($0.filename, $0.kind) })
        #expect(kinds == ["a.png": .file, "album.png": .folder, "b.jpg": .file, "sub": .folder])
        let a = try #require(items.first { $0.filename == "a.png" })
        #expect(a.size == Int64(png.count))
        #expect(a.contentModificationDate != nil)
        #expect(try await backend.item(for: a.identifier) == a)
        #expect(try await backend.enumerateAllItems(in: .rootContainer).map(\.version) == items.map(\.version))
        await #expect(throws: FileProviderError.self) { try await backend.item(for: "notes.txt") }
        #expect(try await backend.enumerateAllItems(in: "sub").map(\.filename) == ["c.png"])
        let missing = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateItems(in: "nope", startingAt: .initialPageSortedByName)
        }
        #expect(missing?.code == .noSuchItem)
        let file = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateItems(in: "a.png", startingAt: .initialPageSortedByName)
        }
        #expect(file?.code == .invalidArgument)
        await backend.close()
    }

    /// A download resumed at an offset past the end of the file (it got shorter since the
    /// transfer broke off): the server answers `416`, and the whole file is fetched again
    /// (AdapterKit's `HTTPRequest.sendResuming`, which WebDAV shares).
    @Test func aResumeFromPastTheEndFetchesTheWholeFile() async throws {
        let folder = try server.makeFolder()
        let backend = try await backend(folder)
        let scratch = try Scratch()
        let image = try Samples.png(seed: 5)
        let created = try await backend.createItem(
            basedOn: .template(identifier: "t1", parent: .rootContainer, filename: "short.png", kind: .file), fields: [.contents],
            contents: try scratch.write("upload", image), options: []
        ).item
        // What a transfer of a longer earlier version left behind.
        let download = try scratch.write("partial", Data(repeating: 7, count: image.count + 100))
        _ = try await backend.fetchContents(
            for: created.identifier, version: nil, to: download, offset: Int64(image.count + 50), progress: nil)
        #expect(try Data(contentsOf: download) == image)
        await backend.close()
    }

    @Test func uploadModifyFetchAndDelete() async throws {
        let folder = try server.makeFolder()
        let backend = try await backend(folder)
        let scratch = try Scratch()
        let first = try Samples.png(seed: 3)
        let created = try await backend.createItem(
            basedOn: .template(identifier: "t1", parent: .rootContainer, filename: "new.png", kind: .file), fields: [.contents],
            contents: try scratch.write("one", first), options: []
        ).item
        #expect(created.size == Int64(first.count))
        #expect(server.contents("new.png", in: folder) == first)
        await #expect(throws: FileProviderError.self) {
            try await backend.createItem(
                basedOn: .template(identifier: "t2", parent: .rootContainer, filename: "new.png", kind: .file), fields: [.contents],
                contents: try scratch.write("two", first), options: [])
        }
        let download = try scratch.write("download", Data())
        let fetched = try await backend.fetchContents(
            for: created.identifier, version: created.version, to: download, offset: 0, progress: nil)
        #expect(try Data(contentsOf: download) == first)
        #expect(fetched.version == created.version)

        let second = try Samples.png(400, 100, seed: 4)
        let modified = try await backend.modifyItem(
            created, baseVersion: created.version, changedFields: [.contents], contents: try scratch.write("three", second), options: []
        ).item
        #expect(modified.version.content != created.version.content)
        #expect(server.contents("new.png", in: folder) == second)
        let stale = await #expect(throws: FileProviderError.self) {
            try await backend.modifyItem(
                created, baseVersion: created.version, changedFields: [.contents], contents: try scratch.write("four", first), options: [])
        }
        #expect(stale?.code == .versionOutOfDate)
        #expect(server.contents("new.png", in: folder) == second)

        let sub = try await backend.createItem(
            basedOn: .template(identifier: "t3", parent: .rootContainer, filename: "sub", kind: .folder), fields: [], contents: nil,
            options: []
        ).item
        _ = try await backend.createItem(
            basedOn: .template(identifier: "t4", parent: sub.identifier, filename: "in.jpg", kind: .file), fields: [.contents],
            contents: try scratch.write("five", try Samples.jpeg()), options: [])
        let notEmpty = await #expect(throws: FileProviderError.self) {
            try await backend.deleteItem(identifier: sub.identifier, baseVersion: nil, options: [])
        }
        #expect(notEmpty?.code == .directoryNotEmpty)
        try await backend.deleteItem(identifier: sub.identifier, baseVersion: nil, options: [.recursive])
        try await backend.deleteItem(identifier: modified.identifier, baseVersion: modified.version, options: [])
        #expect(try await backend.enumerateAllItems(in: .rootContainer).isEmpty)
        let gone = await #expect(throws: FileProviderError.self) {
            try await backend.deleteItem(identifier: modified.identifier, baseVersion: nil, options: [])
        }
        #expect(gone?.code == .noSuchItem)
        await backend.close()
    }

    @Test func whatTheAPICannotDoIsAClearError() async throws {
        let folder = try server.makeFolder()
        let backend = try await backend(folder)
        let scratch = try Scratch()
        let image = try await backend.createItem(
            basedOn: .template(identifier: "t1", parent: .rootContainer, filename: "keep.png", kind: .file), fields: [.contents],
            contents: try scratch.write("img", try Samples.png()), options: []
        ).item
        var renamed = image
        renamed.filename = "other.png"
        let rename = await #expect(throws: FileProviderError.self) {
            try await backend.modifyItem(renamed, baseVersion: image.version, changedFields: [.filename], contents: nil, options: [])
        }
        #expect(rename?.code == .notSupported)
        #expect(rename?.message.contains("cannot rename") == true)

        let text = await #expect(throws: FileProviderError.self) {
            try await backend.createItem(
                basedOn: .template(identifier: "t2", parent: .rootContainer, filename: "notes.txt", kind: .file), fields: [.contents],
                contents: try scratch.write("txt", Data("hello".utf8)), options: [])
        }
        #expect(text?.code == .notSupported)
        #expect(server.contents("notes.txt", in: folder) == nil)

        // 26 MiB: refused before anything is sent, so no truncated copy appears.
        let big = scratch.url.appendingPathComponent("big.png")
        #expect(FileManager.default.createFile(atPath: big.path, contents: nil))
        let handle = try FileHandle(forWritingTo: big)
        try handle.truncate(atOffset: 26 << 20)
        try handle.close()
        let tooBig = await #expect(throws: FileProviderError.self) {
            try await backend.createItem(
                basedOn: .template(identifier: "t3", parent: .rootContainer, filename: "big.png", kind: .file), fields: [.contents],
                contents: big, options: [])
        }
        #expect(tooBig?.code == .notSupported)
        #expect(tooBig?.message.contains("25.0 MiB") == true)
        #expect(server.contents("big.png", in: folder) == nil)
        #expect(try await backend.enumerateAllItems(in: .rootContainer).map(\.filename) == ["keep.png"])
        await backend.close()
    }

    /// Ranged reads against the original API: `Range` answers `206` (and `416` past the end),
    /// the version is the size and `Last-Modified` the reply carries.
    @Test func rangedReads() async throws {
        let folder = try server.makeFolder()
        let png = try Samples.png(400, 300, seed: 5)
        try server.put("r.png", png, in: folder)
        try server.put("sub/in.png", png, in: folder)
        let backend = try await backend(folder)
        let item = try await backend.item(for: "r.png")
        let size = Int64(png.count)
        let scratch = try Scratch()
        let before = Data(repeating: 0xAA, count: png.count + 100)
        let url = try scratch.write("destination", before)
        for range: Range<Int64> in [0..<1, 10..<110, (size - 10)..<(size + 50), (size + 10)..<(size + 20)] {
            let result = try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: range, into: url)
            let clamped = PartialContents.clamp(range, toSize: size)
            #expect(result.range == clamped)
            #expect(result.item.version == item.version)
            let after = try Data(contentsOf: url)
            let bounds = Int(clamped.lowerBound)..<Int(clamped.upperBound)
            #expect(after[bounds] == png[bounds])
            #expect(
                after[..<bounds.lowerBound] == before[..<bounds.lowerBound] && after[bounds.upperBound...] == before[bounds.upperBound...])
            try before.write(to: url)
        }
        let folderRead = await #expect(throws: FileProviderError.self) {
            try await backend.fetchPartialContents(for: "sub", version: item.version, range: 0..<10, into: url)
        }
        #expect(folderRead?.code == .invalidArgument)
        // Another image of another size in its place: the version asked for is gone.
        try server.put("r.png", try Samples.png(401, 300, seed: 6), in: folder)
        let stale = await #expect(throws: FileProviderError.self) {
            try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: 0..<10, into: url)
        }
        #expect(stale?.code == .versionNoLongerAvailable)
        #expect(try Data(contentsOf: url) == before)
        await backend.close()
    }

    /// What the original API cannot take is excluded from sync, told once, never sent again:
    /// a file over its 25 MiB limit and a symlink before anything is sent (the capabilities say
    /// so), a name it would not list when the adapter refuses it. The rest goes up.
    @Test func engineExcludesWhatTheOriginalAPICannotTake() async throws {
        let folder = try server.makeFolder()
        try server.put("photo.png", try Samples.png(), in: folder)
        let engine = try Engine()
        try await engine.manager.addDomain(name: "media", kind: "media", options: ["url": server.url, "root": folder])
        let controller = try await engine.manager.controller(for: "media")
        _ = try await controller.sync()
        let replica = engine.replica("media")
        let small = try Samples.png(32, 32, seed: 4)
        try small.write(to: replica.appendingPathComponent("small.png"))
        try Data("not an image".utf8).write(to: replica.appendingPathComponent("notes.txt"))
        try Data(repeating: 1, count: 25 << 20 + 1).write(to: replica.appendingPathComponent("huge.png"))
        try FileManager.default.createSymbolicLink(
            atPath: replica.appendingPathComponent("link").path, withDestinationPath: "photo.png")

        let report = try await controller.sync()
        #expect(report.notices.count == 3, "\(report.notices)")
        #expect(report.notices.allSatisfy { $0.contains("excluded from sync") }, "\(report.notices)")
        #expect(server.contents("small.png", in: folder) == small)
        #expect(server.contents("notes.txt", in: folder) == nil && server.contents("huge.png", in: folder) == nil)
        #expect(try engine.manager.excludedItems(inDomain: "media").map(\.path) == ["huge.png", "link", "notes.txt"])
        let again = try await controller.sync()
        #expect(again.notices.isEmpty && again.uploaded == 0, "\(again.notices)")
        #expect(FileManager.default.contents(atPath: replica.appendingPathComponent("notes.txt").path) == Data("not an image".utf8))
        await engine.manager.close()
    }

    @Test func engineSyncsMaterializesEvictsUploadsAndDeletes() async throws {
        let folder = try server.makeFolder()
        let png = try Samples.png()
        try server.put("photo.png", png, in: folder)
        try server.put("album/inside.jpg", try Samples.jpeg(), in: folder)
        try server.put("readme.txt", Data("not listed".utf8), in: folder)
        let engine = try Engine()
        try await engine.manager.addDomain(name: "media", kind: "media", options: ["url": server.url, "root": folder])
        let controller = try await engine.manager.controller(for: "media")
        _ = try await controller.sync()
        let names = try controller.list(at: "", recursive: true).map(\.path).sorted()
        #expect(names == ["album", "album/inside.jpg", "photo.png"])
        let replica = engine.replica("media")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("photo.png.placeholder").path))

        let materialized = await controller.materialize(paths: ["photo.png"], recursive: false)
        #expect(materialized.allSatisfy { $0.error == nil })
        #expect(FileManager.default.contents(atPath: replica.appendingPathComponent("photo.png").path) == png)
        let thumbnail = try await controller.thumbnail(at: "photo.png", size: 120)
        #expect(isSquareJPEG(thumbnail, 120))
        let small = try await controller.thumbnail(at: "photo.png", size: 48)
        #expect(isSquareJPEG(small, 48))

        let evicted = await controller.evict(paths: ["photo.png"], recursive: false)
        #expect(evicted.allSatisfy { $0.error == nil })
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("photo.png").path))
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("photo.png.placeholder").path))

        // Upload: a new image in the replica goes to the server on the next sync.
        let added = try Samples.png(64, 64, seed: 9)
        try added.write(to: replica.appendingPathComponent("added.png"))
        _ = try await controller.sync()
        #expect(server.contents("added.png", in: folder) == added)
        // Delete: removing it from the replica removes it from the server.
        try FileManager.default.removeItem(at: replica.appendingPathComponent("added.png"))
        _ = try await controller.sync()
        #expect(server.contents("added.png", in: folder) == nil)
        await engine.manager.close()
    }
}
