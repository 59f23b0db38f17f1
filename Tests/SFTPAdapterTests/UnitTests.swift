import CLibSSH2
import Foundation
import ProviderCore
import Testing

@testable import SFTPAdapter

/// Parts that need no server: the listing filter, status codes, ssh config, versions.
@Suite("SFTP units")
struct UnitTests {
    static let file = RemoteAttributes(size: 3, permissions: 0o100644, modificationTime: 1_700_000_000)

    @Test func listingSkipsUnsafeNames() {
        let folder = RemoteAttributes(permissions: 0o040755)
        let socket = RemoteAttributes(permissions: 0o140755)
        let raw: [(name: [UInt8], attributes: RemoteAttributes)] = [
            (Array(".".utf8), folder), (Array("..".utf8), folder), (Array("a/b".utf8), Self.file),
            (Array("../escape".utf8), Self.file), (Array("/etc".utf8), folder), ([0x61, 0x00, 0x62], Self.file),
            ([0x66, 0xff, 0xfe], Self.file), (Array(String(repeating: "x", count: 256).utf8), Self.file),
            (Array(".fileprovider-staging-123".utf8), Self.file), (Array("sock".utf8), socket), ([], Self.file),
            (Array("line\nbreak".utf8), Self.file), (Array(String(repeating: "é", count: 127).utf8) + [0x78], Self.file),
            (Array("b".utf8), Self.file), (Array("A".utf8), folder),
            (Array(ItemIdentifier.rootContainer.rawValue.utf8), Self.file),
        ]
        let names = SFTPListing.decode(raw, in: .root).map(\.name)
        #expect(names == ["A", "b", "line\nbreak", String(repeating: "é", count: 127) + "x"])
        // Below the root, the special container names are ordinary names.
        let nested = SFTPListing.decode(
            [(Array(ItemIdentifier.rootContainer.rawValue.utf8), Self.file)], in: SFTPPath(components: ["sub"]))
        #expect(nested.count == 1)
    }

    @Test func pagingPositionsAfterName() {
        let entries = ["a", "b", "d"].map { SFTPListing.Entry(name: $0, attributes: Self.file) }
        #expect(SFTPListing.firstIndex(in: entries, after: Array("a".utf8)) == 1)
        #expect(SFTPListing.firstIndex(in: entries, after: Array("c".utf8)) == 2)
        #expect(SFTPListing.firstIndex(in: entries, after: Array("z".utf8)) == 3)
    }

    @Test func identifiersNeverEscapeTheRoot() throws {
        for bad in ["..", "a/../b", "/etc", "a//b", "a/", ".", ItemIdentifier.trashContainer.rawValue] {
            #expect(throws: FileProviderError.self) { _ = try SFTPPath(ItemIdentifier(bad)) }
        }
        let path = try SFTPPath(ItemIdentifier("docs/a b.txt"))
        #expect(path.remote(under: "/srv/root") == "/srv/root/docs/a b.txt")
        #expect(path.remote(under: "/") == "/docs/a b.txt")
        #expect(SFTPPath.root.remote(under: "/srv") == "/srv")
        #expect(SFTPPath(components: ["a"]).contains(SFTPPath(components: ["a", "b"])))
        #expect(!SFTPPath(components: ["a"]).contains(SFTPPath(components: ["ab"])))
    }

    @Test func statusCodesMapToErrors() {
        let cases: [(UInt, FileProviderError.Code)] = [
            (UInt(LIBSSH2_FX_NO_SUCH_FILE), .noSuchItem), (UInt(LIBSSH2_FX_NO_SUCH_PATH), .noSuchItem),
            (UInt(LIBSSH2_FX_PERMISSION_DENIED), .permissionDenied),
            (UInt(LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM), .insufficientQuota),
            (UInt(LIBSSH2_FX_QUOTA_EXCEEDED), .insufficientQuota),
            (UInt(LIBSSH2_FX_FILE_ALREADY_EXISTS), .filenameCollision),
            (UInt(LIBSSH2_FX_DIR_NOT_EMPTY), .directoryNotEmpty),
            (UInt(LIBSSH2_FX_CONNECTION_LOST), .serverUnreachable),
            (UInt(LIBSSH2_FX_FAILURE), .cannotSynchronize),
        ]
        for (status, code) in cases {
            let error = SFTPStatus.error(status, operation: "open", path: "/srv/secret")
            #expect(error.code == code, "status \(status)")
            #expect(error.message.contains("/srv/secret"))
        }
    }

    @Test func sshConfigFirstValueWinsAndIdentitiesAddUp() {
        let config = SSHConfig(
            parsing: """
                User everyone-default
                Host !blocked box*
                  HostName=10.0.0.5
                  Port 2222
                  IdentityFile ~/.ssh/%r@%h
                Host box1 blocked
                  HostName ignored
                  IdentityFile "/keys/second"
                Match host box1
                  User never
                """)
        let resolved = config.resolve("box1")
        #expect(resolved.hostName == "10.0.0.5")
        #expect(resolved.port == 2222)
        #expect(resolved.user == "everyone-default")
        #expect(resolved.identityFiles == ["~/.ssh/%r@%h", "/keys/second"])
        let blocked = config.resolve("blocked")
        #expect(blocked.hostName == "ignored")
        #expect(blocked.port == nil)
        #expect(config.resolve("elsewhere").hostName == nil)
    }

    @Test func writesKeepVersionsApart() {
        let current = RemoteAttributes(size: 6, modificationTime: 100)
        // Same second, same size: one second later.
        #expect(SFTPBackend.modificationTime(for: RemoteAttributes(size: 6, modificationTime: 100), current: current, explicit: nil) == 101)
        // Server clock behind the current file (an earlier bump): still later.
        #expect(SFTPBackend.modificationTime(for: RemoteAttributes(size: 5, modificationTime: 99), current: current, explicit: nil) == 101)
        #expect(SFTPBackend.modificationTime(for: RemoteAttributes(size: 5, modificationTime: 150), current: current, explicit: nil) == 150)
        // An explicit date is kept unless it would repeat the current version.
        #expect(SFTPBackend.modificationTime(for: RemoteAttributes(size: 6), current: current, explicit: 50) == 50)
        #expect(SFTPBackend.modificationTime(for: RemoteAttributes(size: 6), current: current, explicit: 100) == 101)
        #expect(SFTPBackend.modificationTime(for: RemoteAttributes(size: 7), current: current, explicit: 100) == 100)
        let a = SFTPBackend.version(of: RemoteAttributes(size: 6, permissions: 0o100644, modificationTime: 100), kind: .file)
        let b = SFTPBackend.version(of: RemoteAttributes(size: 6, permissions: 0o100600, modificationTime: 100), kind: .file)
        #expect(a.content == b.content && a.metadata != b.metadata)
        let folder = SFTPBackend.version(of: RemoteAttributes(permissions: 0o040755, modificationTime: 5), kind: .folder)
        let later = SFTPBackend.version(of: RemoteAttributes(permissions: 0o040755, modificationTime: 9), kind: .folder)
        #expect(folder == later, "adding children must not change a folder's version")
    }
}
