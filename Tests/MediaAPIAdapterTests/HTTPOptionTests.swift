import Foundation
import MediaAPIAdapter
import ProviderCore
import Testing

/// The media backend takes the kit's HTTP options (same names and order as before), with the kit's checks.
@Suite struct MediaHTTPOptionTests {
    @Test func theDescriptorListsTheKitsOptions() {
        let names = MediaBackend.descriptor.options.map(\.name)
        #expect(names == ["url", "root", "token-env", "ca-file", "connect-timeout", "timeout", "connections", "retries", "page-size"])
    }

    /// An option out of range is refused before anything connects (the URL has no server).
    @Test func anOutOfRangeOptionIsRefusedNamingIt() async throws {
        for (name, value, message) in [
            ("connections", "0", "--connections must be 1 to 64, not 0"),
            ("timeout", "-1", "--timeout must be more than 0 and at most 86400 seconds, not -1"),
            ("retries", "99", "--retries must be 0 to 10, not 99"),
        ] {
            do {
                _ = try await MediaBackend.descriptor.factory(BackendConfiguration(["url": "http://127.0.0.1:1", name: value]))
                Issue.record("--\(name) \(value) was taken")
            } catch let error as FileProviderError {
                #expect(error.code == .invalidArgument)
                #expect(error.message == message)
            }
        }
    }
}
