import AdapterKit
import Foundation
import ProviderCore

extension MediaBackend {
    /// The `media` backend kind: a server of the HTTP media API.
    ///
    /// Options: `url` (required), `root`, `token-env`, `ca-file`, `connect-timeout`, `timeout`,
    /// `connections`, `retries` and `page-size`. The factory connects to find out which API the
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
            BackendOption(name: "ca-file", help: "a CA bundle to verify the server's HTTPS certificate with", type: .path),
            BackendOption(name: "connect-timeout", help: "seconds to wait for a connection", type: .integer, defaultValue: "10"),
            BackendOption(
                name: "timeout", help: "seconds without any byte moving before a transfer is retried", type: .integer,
                defaultValue: "30"),
            BackendOption(
                name: "connections", help: "how many connections (each on its own thread) run at once", type: .integer,
                defaultValue: "4"),
            BackendOption(
                name: "retries", help: "how many times a connection error, 429 or 5xx is retried", type: .integer,
                defaultValue: "4"),
            BackendOption(name: "page-size", help: "the most items one listing page holds", type: .integer, defaultValue: "1000"),
        ],
        libraryVersions: { ["libcurl": HTTPClient.libraryVersion] },
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
            return try await MediaBackend(
                url: try configuration.string("url"), root: configuration["root"] ?? "", token: token,
                caFile: configuration["ca-file"], connectTimeout: Double(try configuration.integer("connect-timeout") ?? 10),
                timeout: Double(try configuration.integer("timeout") ?? 30),
                connections: try configuration.integer("connections") ?? 4,
                retries: try configuration.integer("retries") ?? 4, pageSize: try configuration.integer("page-size") ?? 1000)
        })
}
