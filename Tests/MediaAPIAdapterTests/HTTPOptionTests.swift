import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderTesting
import Testing

/// The media backend takes the kit's HTTP options (same names and order as before), with the kit's checks.
@Suite struct MediaHTTPOptionTests {
    @Test func theDescriptorListsTheKitsOptions() {
        let names = MediaBackend.descriptor.options.map(\.name)
        #expect(names == ["url", "root", "token-env", "ca-file", "connect-timeout", "timeout", "connections", "retries", "page-size"])
    }

    /// An option out of range is refused before anything connects (the URL has no server).
    @Test func anOutOfRangeOptionIsRefusedNamingIt() async {
        #expect(await HTTPOptionRefusals.problems(of: MediaBackend.descriptor, url: "http://127.0.0.1:1") == [])
    }
}
