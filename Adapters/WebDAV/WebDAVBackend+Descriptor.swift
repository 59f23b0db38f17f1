import AdapterKit
import Foundation
import ProviderCore

extension WebDAVBackend {
    /// The `webdav` backend kind: a collection on a WebDAV server.
    ///
    /// Options: `url` (required), `user`, `password-env`, `netrc-file`, the kit's HTTP options
    /// (``HTTPOptions/backendOptions``: `ca-file`, `connect-timeout`, `timeout`, `connections`,
    /// `retries`) and `vendor` (`nextcloud|owncloud|other`). The password is never stored:
    /// `password-env` names an environment variable holding it, or `netrc-file` names a netrc
    /// file with the host's credentials. What the probe of conditional writes found is
    /// remembered in `$XDG_CACHE_HOME/fileprovider/webdav` (``ProbeMemory``), so the probe
    /// writes to the server once per URL and user. The factory connects and checks `url` is a collection,
    /// so it throws `serverUnreachable` when the server cannot be reached, `notAuthenticated`
    /// when the credentials are refused, `noSuchItem` when nothing is at `url`, and
    /// `invalidArgument` for a bad option (a `vendor` not in the list, an HTTP option out of
    /// range) or an environment variable that is not set.
    public static let descriptor = BackendDescriptor(
        kind: "webdav",
        summary: "a collection on a WebDAV server (Apache mod_dav, nginx, Nextcloud, ownCloud, NAS)",
        options: [
            BackendOption(
                name: "url", help: "the URL of the collection to use as the domain's root, http:// or https://", type: .url,
                isRequired: true),
            BackendOption(name: "user", help: "the user name for HTTP Basic authentication"),
            BackendOption(
                name: "password-env",
                help: "the name of an environment variable holding the password (the password itself is never stored)",
                type: .environmentVariable),
            BackendOption(name: "netrc-file", help: "a netrc file holding the user name and password for the host", type: .path),
        ] + HTTPOptions.backendOptions + [
            BackendOption(
                name: "vendor",
                help:
                    "the server's dialect: nextcloud or owncloud (stable identifiers from oc:fileid, OC-Checksum) or other",
                defaultValue: "other")
        ],
        libraryVersions: { ["libcurl": HTTPClient.libraryVersion] },
        keepsFileSystemFlags: false,
        factory: { configuration in
            var password: String?
            if let name = configuration["password-env"], !name.isEmpty {
                guard let value = ProcessInfo.processInfo.environment[name] else {
                    throw FileProviderError(.invalidArgument, "the variable \(name) named by --password-env is not set")
                }
                password = value
            }
            let vendorName = configuration["vendor"].flatMap { $0.isEmpty ? nil : $0 } ?? "other"
            guard let vendor = WebDAVVendor(rawValue: vendorName.lowercased()) else {
                throw FileProviderError(.invalidArgument, "--vendor must be nextcloud, owncloud or other, not '\(vendorName)'")
            }
            let user = configuration["user"].flatMap { $0.isEmpty ? nil : $0 }
            if password != nil && user == nil {
                throw FileProviderError(.invalidArgument, "--password-env needs --user")
            }
            let http = try HTTPOptions(configuration: configuration)
            return try await WebDAVBackend(
                url: try configuration.string("url"), user: user, password: password, netrcFile: configuration["netrc-file"],
                caFile: http.caFile, connectTimeout: http.connectTimeout, timeout: http.timeout, connections: http.connections,
                retries: http.retries, vendor: vendor,
                probeFolder: ProbeMemory(environment: ProcessInfo.processInfo.environment)?.folder)
        })
}
