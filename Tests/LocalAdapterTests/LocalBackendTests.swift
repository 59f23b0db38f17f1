import Foundation
import LocalAdapter
import ProviderCore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("LocalBackend")
struct LocalBackendTests {
    /// Runs `body` with a backend over a fresh folder, then removes the folder.
    func withBackend(
        pageSize: Int = 2000, _ body: (LocalBackend, TemporaryFolder) async throws -> Void
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let backend = try LocalBackend(rootPath: folder.path, pageSize: pageSize)
        do {
            try await body(backend, folder)
        } catch {
            await backend.close()
            throw error
        }
        await backend.close()
    }

    func destination(_ folder: TemporaryFolder) throws -> URL {
        let url = folder.url.deletingLastPathComponent().appendingPathComponent("download-\(UUID().uuidString)")
        try Data().write(to: url)
        return url
    }

    @Test func batchFetchCopiesEachFileAndRefusesLinksAndFIFOs() async throws {
        let outside = try TemporaryFolder()
        defer { outside.remove() }
        let secret = outside.url.appendingPathComponent("secret.txt")
        try Data("secret".utf8).write(to: secret)
        try await withBackend { backend, folder in
            let sub = folder.url.appendingPathComponent("sub")
            try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
            let big = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try Data("a".utf8).write(to: sub.appendingPathComponent("a"))
            try big.write(to: sub.appendingPathComponent("big"))
            try FileManager.default.createSymbolicLink(atPath: sub.appendingPathComponent("link").path, withDestinationPath: secret.path)
            #expect(mkfifo(sub.appendingPathComponent("fifo").path, 0o644) == 0)
            try Data().write(to: folder.url.appendingPathComponent("empty"))
            let names: [ItemIdentifier] = ["sub/a", "sub/big", "sub/link", "sub/fifo", "sub/missing", "empty", "sub/a"]
            let destinations = try names.map { _ in try destination(folder) }
            defer { for url in destinations { try? FileManager.default.removeItem(at: url) } }
            // Leftovers in a destination are replaced: a fresh download truncates.
            try Data("left over, longer than a".utf8).write(to: destinations[0])
            let results = await backend.fetchContents(
                zip(names, destinations).map { ContentRequest(identifier: $0, destination: $1) }, progress: nil)
            #expect(results.count == names.count)
            #expect(try results[0].get().size == 1)
            #expect(try Data(contentsOf: destinations[0]) == Data("a".utf8))
            #expect(try Data(contentsOf: destinations[1]) == big)
            #expect(try results[1].get().version == (try await backend.item(for: "sub/big")).version)
            for (index, code) in [(2, FileProviderError.Code.invalidArgument), (3, .invalidArgument), (4, .noSuchItem)] {
                guard case .failure(let error) = results[index] else {
                    Issue.record("\(names[index]) was fetched")
                    continue
                }
                #expect(error.code == code, "\(names[index]): \(error.message)")
            }
            #expect(try Data(contentsOf: destinations[2]).isEmpty)
            #expect(try results[5].get().size == 0)
            #expect(try Data(contentsOf: destinations[6]) == Data("a".utf8))
        }
    }

    @Test func symlinkOutsideRootIsReportedAndNeverFollowed() async throws {
        let outside = try TemporaryFolder()
        defer { outside.remove() }
        let secret = outside.url.appendingPathComponent("secret.txt")
        try Data("secret".utf8).write(to: secret)
        try await withBackend { backend, folder in
            try FileManager.default.createSymbolicLink(
                atPath: folder.url.appendingPathComponent("escape").path, withDestinationPath: secret.path)
            let items = try await backend.enumerateAllItems(in: .rootContainer)
            #expect(items.count == 1)
            #expect(items.first?.kind == .symlink)
            #expect(items.first?.symlinkTargetPath == secret.path)
            #expect(items.first?.size == Int64(secret.path.utf8.count))

            // Reading through the link is refused.
            let url = try destination(folder)
            defer { try? FileManager.default.removeItem(at: url) }
            let error = await #expect(throws: FileProviderError.self) {
                try await backend.fetchContents(for: "escape", version: nil, to: url, offset: 0, progress: nil)
            }
            #expect(error?.code == .invalidArgument)
            #expect(try Data(contentsOf: url).isEmpty)

            // Writing through the link is refused and the target is untouched.
            let link = try await backend.item(for: "escape")
            let upload = folder.url.deletingLastPathComponent().appendingPathComponent("upload-\(UUID().uuidString)")
            try Data("overwritten".utf8).write(to: upload)
            defer { try? FileManager.default.removeItem(at: upload) }
            await #expect(throws: FileProviderError.self) {
                try await backend.modifyItem(
                    link, baseVersion: link.version, changedFields: [.contents], contents: upload, options: [])
            }
            #expect(try Data(contentsOf: secret) == Data("secret".utf8))

            // Deleting the link removes the link, not the target.
            try await backend.deleteItem(identifier: "escape", baseVersion: link.version, options: [])
            #expect(try Data(contentsOf: secret) == Data("secret".utf8))
        }
    }

    @Test func symlinkedFolderIsNotTraversed() async throws {
        let outside = try TemporaryFolder()
        defer { outside.remove() }
        try Data("hidden".utf8).write(to: outside.url.appendingPathComponent("inside.txt"))
        try await withBackend { backend, folder in
            try FileManager.default.createSymbolicLink(
                atPath: folder.url.appendingPathComponent("linked").path, withDestinationPath: outside.path)
            let link = try await backend.item(for: "linked")
            #expect(link.kind == .symlink)
            await #expect(throws: FileProviderError.self) {
                try await backend.enumerateItems(in: "linked", startingAt: .initialPageSortedByName)
            }
            let error = await #expect(throws: FileProviderError.self) {
                try await backend.item(for: "linked/inside.txt")
            }
            #expect(error?.code == .noSuchItem)
            let template = Item.template(identifier: "t", parent: "linked", filename: "planted.txt", kind: .file)
            await #expect(throws: FileProviderError.self) {
                try await backend.createItem(basedOn: template, fields: [], contents: nil, options: [])
            }
            #expect(!FileManager.default.fileExists(atPath: outside.url.appendingPathComponent("planted.txt").path))
        }
    }

    @Test func unsafeNamesOnDiskAreSkipped() async throws {
        try await withBackend { backend, folder in
            // A name that is not UTF-8, made with raw bytes.
            let raw: [UInt8] = Array(folder.path.utf8) + Array("/bad-\u{0}".utf8.dropLast()) + [0xff, 0xfe, 0x00]
            let fd = raw.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY, 0o644) }
            }
            #expect(fd >= 0)
            close(fd)
            try Data("fine".utf8).write(to: folder.url.appendingPathComponent("good.txt"))
            try Data().write(to: folder.url.appendingPathComponent(".fileprovider-staging-leftover"))
            let items = try await backend.enumerateAllItems(in: .rootContainer)
            #expect(items.map(\.filename) == ["good.txt"])

            // A recursive delete still removes the unlisted entry.
            let sub = folder.url.appendingPathComponent("sub")
            try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: false)
            let rawInSub: [UInt8] = Array(sub.path.utf8) + [0x2f, 0xc3, 0x28, 0x00]
            let fd2 = rawInSub.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY, 0o644) }
            }
            #expect(fd2 >= 0)
            close(fd2)
            #expect(try await backend.enumerateAllItems(in: "sub").isEmpty)
            try await backend.deleteItem(identifier: "sub", baseVersion: nil, options: [.recursive])
            #expect(!FileManager.default.fileExists(atPath: sub.path))
        }
    }

    @Test func unsafeIdentifiersNameNothing() async throws {
        try await withBackend { backend, folder in
            try Data("x".utf8).write(to: folder.url.appendingPathComponent("a.txt"))
            for identifier in ["../a.txt", "/a.txt", "a.txt/", "./a.txt", "", ItemIdentifier.workingSet.rawValue] {
                let error = await #expect(throws: FileProviderError.self) {
                    try await backend.item(for: ItemIdentifier(identifier))
                }
                #expect(error?.code == .noSuchItem, "\(identifier.debugDescription)")
            }
        }
    }

    @Test func factoryRefusesMissingRoot() async throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("missing-\(UUID().uuidString)").path
        let registry = BackendRegistry([LocalBackend.descriptor])
        let error = await #expect(throws: FileProviderError.self) {
            try await registry.makeBackend(kind: "local", values: ["root": missing])
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains(missing) == true)
        #expect(error?.message.contains("No such file") == true)
    }

    @Test func factoryRefusesFileAsRoot() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("plain")
        try Data().write(to: file)
        let error = await #expect(throws: FileProviderError.self) {
            try await LocalBackend.descriptor.factory(BackendConfiguration(["root": file.path]))
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("not a folder") == true)
    }

    @Test func descriptorOptions() throws {
        let descriptor = LocalBackend.descriptor
        #expect(descriptor.kind == "local")
        #expect(descriptor.options.map(\.name) == ["root", "page-size"])
        let configuration = try descriptor.validate(["root": "/tmp"])
        #expect(configuration["page-size"] == "2000")
        #expect(throws: FileProviderError.self) { try descriptor.validate([:]) }
        #expect(throws: FileProviderError.self) { try descriptor.validate(["root": "/tmp", "page-size": "many"]) }
    }

    @Test func factoryHonoursPageSize() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        for index in 0..<5 { try Data().write(to: folder.url.appendingPathComponent("f\(index)")) }
        let backend = try await LocalBackend.descriptor.factory(BackendConfiguration(["root": folder.path, "page-size": "2"]))
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(page.items.map(\.filename) == ["f0", "f1"])
        #expect(page.nextPage != nil)
        await backend.close()
    }

    @Test func identifiersArePathsRelativeToRoot() async throws {
        try await withBackend { backend, folder in
            try FileManager.default.createDirectory(
                at: folder.url.appendingPathComponent("docs/deep"), withIntermediateDirectories: true)
            try Data("a".utf8).write(to: folder.url.appendingPathComponent("docs/deep/a.txt"))
            let item = try await backend.item(for: "docs/deep/a.txt")
            #expect(item.parentIdentifier == "docs/deep")
            #expect(item.filename == "a.txt")
            #expect(try await backend.enumerateAllItems(in: "docs").map(\.identifier) == ["docs/deep"])
            let root = try await backend.item(for: .rootContainer)
            #expect(root.kind == .folder)
        }
    }

    @Test func templateDateIsKept() async throws {
        try await withBackend { backend, folder in
            let date = Date(timeIntervalSince1970: 1_600_000_000.25)
            let template = Item.template(
                identifier: "t", parent: .rootContainer, filename: "dated", kind: .file, contentModificationDate: date)
            let item = try await backend.createItem(basedOn: template, fields: [], contents: nil, options: []).item
            let kept = try #require(item.contentModificationDate)
            #expect(abs(kept.timeIntervalSince(date)) < 0.001)
        }
    }

    @Test func chmodChangesOnlyMetadataVersion() async throws {
        try await withBackend { backend, folder in
            let url = folder.url.appendingPathComponent("mode.txt")
            try Data("m".utf8).write(to: url)
            let before = try await backend.item(for: "mode.txt")
            #expect(chmod(url.path, 0o600) == 0)
            let after = try await backend.item(for: "mode.txt")
            #expect(after.version.content == before.version.content)
            #expect(after.version.metadata != before.version.metadata)
        }
    }

    @Test func largeFolderPagesThroughCachedListing() async throws {
        try await withBackend(pageSize: 100) { backend, folder in
            for index in 0..<1050 {
                let fd = open(folder.url.appendingPathComponent(String(format: "n%05d", index)).path, O_CREAT | O_WRONLY, 0o644)
                close(fd)
            }
            // Make the folder's change time old enough for the listing to be kept.
            var names: [String] = []
            var page: Page? = .initialPageSortedByName
            while let current = page {
                let result = try await backend.enumerateItems(in: .rootContainer, startingAt: current)
                names += result.items.map(\.filename)
                page = result.nextPage
            }
            #expect(names.count == 1050)
            #expect(names == names.sorted())
        }
    }

    /// A folder whose entries take many reads of the kernel's directory records (3,000 long
    /// names, about 300 KiB of records against a 32 KiB buffer) is listed whole, and listed
    /// whole again (each listing reads from the start).
    @Test func aFolderOfManyLongNamesIsListedWhole() async throws {
        try await withBackend { backend, folder in
            let names = (0..<3000).map { String(format: "entry-%05d-", $0) + String(repeating: "é", count: 24) }
            for name in names { close(open(folder.url.appendingPathComponent(name).path, O_CREAT | O_WRONLY, 0o644)) }
            for _ in 0..<2 {
                let listed = try await backend.listAllItems(in: .rootContainer).items.map(\.filename)
                #expect(listed.count == names.count)
                #expect(listed.sorted() == names.sorted())
            }
        }
    }
}
