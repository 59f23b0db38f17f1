import AdapterKit
import Foundation
import ProviderCore

extension WebDAVBackend {
    /// The `webdav` backend kind: a collection on a WebDAV server.
    ///
    /// Options: `url` (required), `user`, `password-env`, `netrc-file`, the kit's HTTP options
    /// (``HTTPOptions/backendOptions``: `ca-file`, `connect-timeout`, `timeout`, `connections`,
    /// `retries`) and `vendor` (`nextcloud|owncloud|other`). The password is never stored: with
    /// `user`, it is looked up as ``PasswordLookup`` says (the variable named by `password-env`,
    /// the systemd credential `fileprovider.DOMAIN`, the Secret Service, netrc: `netrc-file` or
    /// `~/.netrc`, machine = the URL's host); without `user`, a netrc entry for the host gives
    /// both. When no source has one the domain connects without credentials, and a refusal
    /// names every source tried. What the probe of conditional writes found is
    /// remembered in `$XDG_CACHE_HOME/fileprovider/webdav` (``ProbeMemory``), so the probe
    /// writes to the server once per URL and user. The factory connects and checks `url` is a collection,
    /// so it throws `serverUnreachable` when the server cannot be reached, `notAuthenticated`
    /// when the credentials are refused, `noSuchItem` when nothing is at `url`, and
    /// `invalidArgument` for a bad option (a `vendor` not in the list, an HTTP option out of
    /// range, a `netrc-file` that cannot be read, `password-env` without `user`).
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
                help:
                    "the name of an environment variable holding the password, tried first (the password itself is never stored; see 'Passwords' in Docs/CLI.md for the other sources)",
                type: .environmentVariable),
            BackendOption(
                name: "netrc-file", help: "a netrc file holding the user name and password for the host (default: ~/.netrc)",
                type: .path),
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
            let vendorName = configuration["vendor"].flatMap { $0.isEmpty ? nil : $0 } ?? "other"
            guard let vendor = WebDAVVendor(rawValue: vendorName.lowercased()) else {
                throw FileProviderError(.invalidArgument, "--vendor must be nextcloud, owncloud or other, not '\(vendorName)'")
            }
            var user = configuration["user"].flatMap { $0.isEmpty ? nil : $0 }
            let variable = configuration["password-env"].flatMap { $0.isEmpty ? nil : $0 }
            if variable != nil && user == nil {
                throw FileProviderError(.invalidArgument, "--password-env needs --user")
            }
            let netrcFile = configuration["netrc-file"].flatMap { $0.isEmpty ? nil : $0 }
            if let netrcFile, !FileManager.default.isReadableFile(atPath: netrcFile) {
                throw FileProviderError(.invalidArgument, "--netrc-file: the file \(netrcFile) cannot be read")
            }
            let url = try configuration.string("url")
            let host = URL(string: url)?.host.map { [$0] } ?? []
            // Without a user only netrc can say who to be (an entry gives both).
            let lookup = PasswordLookup(
                domain: user == nil ? nil : configuration.domainName, user: user, machines: host,
                environmentVariable: variable, netrcFile: netrcFile)
            let outcome = await lookup.findOffThePool()
            var password: String?
            let hint: String
            if let found = outcome.found {
                password = found.password
                if user == nil { user = found.login }
                hint = "check --user and the password (from \(found.source))"
            } else if user != nil {
                hint = "no password was found: tried \(outcome.tried.joined(separator: ", ")); \(PasswordLookup.advice)"
            } else {
                hint = "give --user and a password (see 'Passwords' in Docs/CLI.md), or a netrc entry for the host"
            }
            let http = try HTTPOptions(configuration: configuration)
            return try await WebDAVBackend(
                url: url, user: user, password: password, caFile: http.caFile, connectTimeout: http.connectTimeout,
                timeout: http.timeout, connections: http.connections, retries: http.retries, vendor: vendor,
                probeFolder: ProbeMemory(environment: ProcessInfo.processInfo.environment)?.folder, authenticationHint: hint)
        })
}
