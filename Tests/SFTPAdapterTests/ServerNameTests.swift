import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Names and symlinks made on the server's side, not through the backend.
@Suite("SFTP server-side names and symlinks")
struct ServerNameTests {
    @Test func oddNamesFromTheServerRoundTripAndBadOnesAreSkipped() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let names = ["line\nbreak.txt", "tab\there", "back\\slash", "日本語.txt", "cafe\u{301}", String(repeating: "é", count: 127) + "x", " lead", "trail "]
        for name in names { try Data(name.utf8).write(to: URL(fileURLWithPath: root + "/" + name)) }
        // A name that is not UTF-8, made with raw bytes.
        let bad = Array((root + "/bad-\u{7f}").utf8) + [0xff, 0xfe, 0]
        let fd = bad.withUnsafeBufferPointer { open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_CREAT | O_WRONLY, 0o644) }
        #expect(fd >= 0)
        close(fd)
        let backend = try TestServer.backend(server, root: root)
        let listed = try await backend.enumerateAllItems(in: .rootContainer)
        #expect(Set(listed.map { Array($0.filename.utf8) }) == Set(names.map { Array($0.utf8) }))
        let scratch = try TestServer.scratch()
        for item in listed {
            let url = scratch.appendingPathComponent(UUID().uuidString)
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            _ = try await backend.fetchContents(for: item.identifier, version: nil, to: url, offset: 0, progress: nil)
            #expect(try Data(contentsOf: url) == Data(item.filename.utf8), "\(item.filename.debugDescription)")
            #expect(try await backend.item(for: item.identifier).version == item.version)
        }
        await backend.close()
    }

    @Test func symlinksAreNeverFollowedOutOfTheRoot() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let outside = try server.makeFolder("outside")
        try Data("secret".utf8).write(to: URL(fileURLWithPath: outside + "/secret.txt"))
        try FileManager.default.createSymbolicLink(atPath: root + "/escape", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: root + "/secret-link", withDestinationPath: outside + "/secret.txt")
        try FileManager.default.createDirectory(atPath: root + "/inner", withIntermediateDirectories: true)
        let backend = try TestServer.backend(server, root: root)
        let listed = try await backend.enumerateAllItems(in: .rootContainer)
        let kinds = Dictionary(uniqueKeysWithValues: listed.map { ($0.filename, $0.kind) })
        #expect(kinds == ["escape": .symlink, "secret-link": .symlink, "inner": .folder])
        #expect(listed.first { $0.filename == "escape" }?.symlinkTargetPath == outside)
        await #expect(throws: FileProviderError.self) {
            _ = try await backend.enumerateItems(in: "escape", startingAt: .initialPageSortedByName)
        }
        for identifier in ["escape/secret.txt", "secret-link"] {
            let url = try TestServer.scratch().appendingPathComponent("x")
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            do {
                _ = try await backend.fetchContents(for: ItemIdentifier(identifier), version: nil, to: url, offset: 0, progress: nil)
                Issue.record("fetched \(identifier) through a symlink")
            } catch {
                #expect(error.code == .noSuchItem || error.code == .invalidArgument, "\(error.code.name)")
            }
            #expect(try Data(contentsOf: url).isEmpty)
        }
        await #expect(throws: FileProviderError.self) { _ = try await backend.item(for: "escape/secret.txt") }
        // Nothing is created through the symlinked folder either.
        let contents = try TestServer.scratch().appendingPathComponent("c")
        try Data("x".utf8).write(to: contents)
        await #expect(throws: FileProviderError.self) {
            _ = try await backend.createItem(
                basedOn: Item.template(identifier: "t", parent: "escape", filename: "planted", kind: .file),
                fields: [.contents], contents: contents, options: [])
        }
        #expect(!FileManager.default.fileExists(atPath: outside + "/planted"))
        await backend.close()
    }
}
