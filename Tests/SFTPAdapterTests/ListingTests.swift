import CLibSSH2
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Folder listings on the second SFTP channel: several READDIR requests in flight, the real
/// path asked for with the OPENDIR, the CLOSE not waited for.
@Suite("SFTP listings")
struct ListingTests {
    @Test func largeFoldersAreListedWholeOnOneConnection() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        // 1,234 entries take 13 replies of OpenSSH's 100 names: batches of 4, 8 and 16 requests.
        let names = (0..<1234).map { String(format: "f%04d-é", $0) }
        try FileManager.default.createDirectory(atPath: root + "/big", withIntermediateDirectories: true)
        for name in names { _ = FileManager.default.createFile(atPath: root + "/big/" + name, contents: Data(name.utf8)) }
        try FileManager.default.createDirectory(atPath: root + "/small", withIntermediateDirectories: true)
        let outside = try server.makeFolder("outside")
        try FileManager.default.createSymbolicLink(atPath: root + "/small/link", withDestinationPath: outside)
        // One connection: every listing's unanswered CLOSE must be dropped, not taken for the
        // reply of a later request.
        let backend = try TestServer.backend(server, root: root, extra: ["connections": "1"], pageSize: 500)
        for _ in 0..<3 {
            let listed = try await backend.enumerateAllItems(in: "big")
            #expect(listed.map(\.filename) == names)
            #expect(listed.allSatisfy { $0.size == Int64($0.filename.utf8.count) && $0.kind == .file })
            #expect(try await backend.enumerateAllItems(in: "small").map(\.filename) == ["link"])
            // A folder reached through a symlink is refused before it is read.
            await #expect(throws: FileProviderError.self) {
                _ = try await backend.enumerateItems(in: "small/link", startingAt: .initialPageSortedByName)
            }
            do {
                _ = try await backend.enumerateItems(in: "small/link", startingAt: .initialPageSortedByName)
            } catch {
                #expect(error.code == .noSuchItem)
            }
            // A file and a missing folder: the errors of a listing.
            do {
                _ = try await backend.enumerateItems(in: "big/f0001-é", startingAt: .initialPageSortedByName)
                Issue.record("listed a file")
            } catch {
                #expect(error.code == .invalidArgument, "\(error)")
            }
            do {
                _ = try await backend.enumerateItems(in: "missing", startingAt: .initialPageSortedByName)
                Issue.record("listed a missing folder")
            } catch {
                #expect(error.code == .noSuchItem, "\(error)")
            }
            // A request on the same channel after the listings gets its own reply.
            let link = try await backend.createItem(
                basedOn: Item.template(
                    identifier: "l", parent: .rootContainer, filename: "made-\(UUID().uuidString)", kind: .symlink,
                    symlinkTargetPath: "big"),
                fields: [], contents: nil, options: [])
            #expect(link.item.kind == .symlink)
        }
        await backend.close()
    }

    @Test func hostileNameRepliesAreRefusedNotTrusted() throws {
        func reply(_ bytes: [UInt8]) -> Reply { Reply(type: SFTPChannel.Packet.name, reader: SFTPReader(bytes)) }
        var entries: [(name: [UInt8], attributes: RemoteAttributes)] = []
        // A count of four billion names with none following.
        var huge = reply([0xff, 0xff, 0xff, 0xff])
        #expect(throws: FileProviderError.self) { try huge.appendNames(to: &entries) }
        // A name longer than the packet.
        var long = reply([0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, 0x61])
        #expect(throws: FileProviderError.self) { try long.appendNames(to: &entries) }
        // Attributes cut short.
        var short = reply([0, 0, 0, 1, 0, 0, 0, 1, 0x61, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0, 0])
        #expect(throws: FileProviderError.self) { try short.appendNames(to: &entries) }
        #expect(entries.isEmpty)
        // Extended attribute pairs are skipped; the fields that are flagged are read.
        let flags = UInt32(LIBSSH2_SFTP_ATTR_SIZE | LIBSSH2_SFTP_ATTR_PERMISSIONS) | UInt32(LIBSSH2_SFTP_ATTR_EXTENDED)
        var good = reply(
            [0, 0, 0, 1] + string("a/b") + string("long") + u32(flags) + [0, 0, 0, 0, 0, 0, 1, 0] + u32(0o100644)
                + u32(1) + string("k") + string("v"))
        try good.appendNames(to: &entries)
        #expect(entries.count == 1)
        #expect(entries.first?.name == Array("a/b".utf8))
        #expect(entries.first?.attributes.size == 256)
        #expect(entries.first?.attributes.kind == .file)
        // Such a name still goes through the listing filter.
        #expect(SFTPListing.decode(entries, in: .root).isEmpty)
    }

    private func u32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    private func string(_ text: String) -> [UInt8] { u32(UInt32(text.utf8.count)) + Array(text.utf8) }
}
