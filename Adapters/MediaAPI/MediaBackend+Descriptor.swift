import AdapterKit
import Foundation
import ProviderCore

extension MediaBackend {
    /// The `media` backend kind: a server of the HTTP media API.
    ///
    /// Options: `url` (required), `root`, `token-env`, the kit's HTTP options
    /// (``HTTPOptions/backendOptions``: `ca-file`, `connect-timeout`, `timeout`, `connections`,
    /// `retries`) and `page-size`. The factory connects to find out which API the
    /// server speaks, so it throws `serverUnreachable` when the server cannot be reached,
    /// `notAuthenticated` when the token is refused and `invalidArgument` for a bad option or an
    /// environment variable that is not set.
    public static let descriptor = BackendDescriptor(
        kind: "media",
        summary: "a server of the HTTP media API (media-server, or the original)",
        options: [
            BackendOption(name: "url", help: "the server's base URL, http:// or https://", type: .url, isRequired: true),
            BackendOption(name: "root", help: "a folder on the server to use as the domain's root", defaultValue: ""),
            BackendOption(
                name: "token-env", help: "the name of an environment variable holding a bearer token (the token itself is never stored)",
                type: .environmentVariable),
        ] + HTTPOptions.backendOptions + [
            BackendOption(name: "page-size", help: "the most items one listing page holds", type: .integer, defaultValue: "1000")
        ],
        libraryVersions: { ["libcurl": HTTPClient.libraryVersion] },
        keepsFileSystemFlags: false,
        factory: { configuration in
            var token: String?
            if let name = configuration["token-env"], !name.isEmpty {
                guard let value = ProcessInfo.processInfo.environment[name] else {
                    throw FileProviderError(.invalidArgument, "the variable \(name) named by --token-env is not set")
                }
                guard !value.isEmpty else {
                    throw FileProviderError(.invalidArgument, "the variable \(name) named by --token-env is empty")
                }
                token = value
            }
            let http = try HTTPOptions(configuration: configuration)
            return try await MediaBackend(
                url: try configuration.string("url"), root: configuration["root"] ?? "", token: token, caFile: http.caFile,
                connectTimeout: http.connectTimeout, timeout: http.timeout, connections: http.connections,
                retries: http.retries, pageSize: try configuration.integer("page-size") ?? 1000)
        })
}
