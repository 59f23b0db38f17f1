import Foundation
import ProviderTesting
import Testing

/// libcurl is loaded on first use (Adapters/CCurl): the program starts and serves the other
/// stores without it, and an HTTP store says what to install.
@Suite struct LibcurlLoadingTests {
    @Test func withoutLibcurlOtherStoresWorkAndAnHTTPStoreSaysWhatToInstall() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = ["FILEPROVIDER_LIBCURL": "libcurl-not-installed.so.4"]
        let data = temp.url.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: data.appendingPathComponent("hello.txt"))

        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "here", "--backend", "local", "--root", data.path], environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let synced = try await cli.run(["sync", "here"], environment: environment)
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(synced.stdout.contains("1 added"), "\(synced.stdout)")

        // Nothing listens there: without libcurl the request is never made.
        let http = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "web", "--backend", "webdav", "--url", "http://127.0.0.1:9/dav"],
            environment: environment)
        #expect(http.status != 0)
        for part in ["libcurl cannot be loaded (libcurl-not-installed.so.4", "install libcurl4"] {
            #expect(http.stderr.contains(part), "\(part) not in: \(http.stderr)")
        }
        let version = try await cli.run(["version"], withHome: false, environment: environment)
        #expect(version.status == 0, "\(version.stderr)")
        #expect(version.stdout.contains("libcurl not loaded: libcurl-not-installed.so.4"), "\(version.stdout)")
    }
}
