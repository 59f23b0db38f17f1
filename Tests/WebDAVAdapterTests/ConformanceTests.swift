import Foundation
import ProviderCore
import ProviderTesting
import Testing
import WebDAVAdapter

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
    static let webdav = BackendConformance(makeBackend: { try await SharedApache.backend() })

    @Test("WebDAVBackend", arguments: BackendConformance.checkNames)
    func conformance(_ name: String) async throws {
        try await Self.webdav.run(name)
    }
}
