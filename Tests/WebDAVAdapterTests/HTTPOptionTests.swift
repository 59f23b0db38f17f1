import Foundation
import ProviderCore
import ProviderTesting
import Testing
import WebDAVAdapter

/// The webdav backend takes the kit's HTTP options (same names and order as before), with the kit's checks.
@Suite struct WebDAVHTTPOptionTests {
    @Test func theDescriptorListsTheKitsOptions() {
        let names = WebDAVBackend.descriptor.options.map(\.name)
        #expect(
            names == [
                "url", "user", "password-env", "netrc-file", "ca-file", "connect-timeout", "timeout", "connections", "retries", "vendor",
            ])
    }

    /// An option out of range is refused before anything connects (the URL has no server).
    @Test func anOutOfRangeOptionIsRefusedNamingIt() async {
        #expect(await HTTPOptionRefusals.problems(of: WebDAVBackend.descriptor, url: "http://127.0.0.1:1/dav") == [])
    }

    /// Each upload waits for two round trips (`PUT`, then `PROPFIND`): the engine sends as many
    /// at once as the domain has connections, not its default four (with four, half of the
    /// benchmark's eight connections stood idle).
    @Test func theBackendAsksForAsManyTransfersAsItHasConnections() async throws {
        let server = try await SharedApache.server()
        let backend = try await WebDAVBackend(url: try server.makeFolder(), connections: 12)
        #expect(backend.capabilities.concurrentTransfers == 12)
        await backend.close()
    }
}
