import Foundation
import ProviderCore
import ProviderTesting
import Testing
@testable import WebDAVAdapter

/// The Apache mod_dav server the suites share, started on first use off the cooperative pool;
/// each check gets a fresh folder.
enum SharedApache {
    private static let startup = Task { try await offThePool { try ApacheDAVServer() } }

    /// - Throws: why Apache could not be started.
    static func server() async throws -> ApacheDAVServer { try await startup.value }

    /// A backend over a fresh, empty collection of the shared server.
    static func backend() async throws -> WebDAVBackend {
        let server = try await server()
        return try await WebDAVBackend(url: try server.makeFolder())
    }
}

@Suite("BackendConformance against Apache mod_dav")
struct ConformanceTests {
    static let webdav = BackendConformance(
        makeBackend: { try await SharedApache.backend() },
        sameStore: { first in try await WebDAVBackend(url: try #require(first as? WebDAVBackend).baseURL) })

    @Test("WebDAVBackend", arguments: BackendConformance.checkNames)
    func conformance(_ name: String) async throws {
        try await Self.webdav.run(name)
    }
}

/// The `rclone serve webdav` server the rclone suite shares, started on first use off the
/// cooperative pool; each check gets a fresh folder.
enum SharedRclone {
    private static let startup = Task { try await offThePool { try RcloneDAVServer() } }

    /// - Throws: why rclone could not be started.
    static func server() async throws -> RcloneDAVServer { try await startup.value }

    /// A backend over a fresh, empty collection of the shared server.
    static func backend() async throws -> WebDAVBackend {
        let server = try await server()
        return try await WebDAVBackend(url: try server.makeFolder())
    }
}

/// The same suite against a second, independent implementation: Go's `x/net/webdav` as
/// `rclone serve webdav` serves it, which ignores `If-Match` and `If-None-Match` on writes,
/// answers `403` to a `MOVE` of something missing and serves a folder's `GET` as HTML.
@Suite("BackendConformance against rclone serve webdav")
struct RcloneConformanceTests {
    static let webdav = BackendConformance(
        makeBackend: { try await SharedRclone.backend() },
        limitations: .init(cannot: [
            "nameWithNewline":
                "it lists a name with a control character under another name (a Unicode picture of the character)"
        ]),
        sameStore: { first in try await WebDAVBackend(url: try #require(first as? WebDAVBackend).baseURL) })

    @Test("WebDAVBackend", arguments: webdav.applicableCheckNames)
    func conformance(_ name: String) async throws {
        try await Self.webdav.run(name)
    }

    /// The name it does not keep is refused clearly, not reported as a missing item.
    @Test func aNameTheServerDoesNotKeepIsInvalidFilename() async throws {
        let backend = try await SharedRclone.backend()
        let template = Item(
            identifier: ItemIdentifier("line\nbreak.txt"), parentIdentifier: .rootContainer, filename: "line\nbreak.txt", kind: .file)
        do {
            _ = try await backend.createItem(basedOn: template, fields: [], contents: nil, options: [])
            Issue.record("the server keeps control characters now; drop nameWithNewline from the limitations")
        } catch {
            #expect(error.code == .invalidFilename, "\(error)")
            #expect(error.message.contains("another name"))
        }
        await backend.close()
    }

    /// Neither server applies a write's condition atomically: rclone ignores `If-Match`, Apache
    /// checks it when the request starts (two racing writers from one version are both taken).
    /// The backend says so; against Apache it leaves the check to the server.
    @Test func noServerWritesConditionallyAndTheBackendSaysSo() async throws {
        let backend = try await SharedRclone.backend()
        #expect(!backend.capabilities.supportsConditionalWrites)
        #expect(!backend.conditions.isSet)
        let apache = try await SharedApache.backend()
        #expect(!apache.capabilities.supportsConditionalWrites)
        #expect(apache.conditions.isSet)
    }
}
