import AdapterKit
import Foundation
import ProviderCore

/// A backend over a WebDAV server (RFC 4918): Apache `mod_dav`, nginx, lighttpd, wsgidav,
/// Nextcloud, ownCloud, NAS boxes. It talks HTTP through the adapter kit's libcurl client.
///
/// Identifiers are paths relative to the collection at `url` (`docs/a.txt`); that collection
/// is ``ItemIdentifier/rootContainer``. Listings are `PROPFIND` with `Depth: 1`, a file's content
/// version is its ETag (in one form, ``EntityTag``) or, on a server whose listings give none
/// (nginx), its date and size (``DAVVersion/stamp(_:size:)``), and writes are conditional on it
/// (`If-Match`, `If-None-Match: *`; a stamp is checked with a `PROPFIND` just before), so the
/// server checks the base version as a write starts. Every HTTP exchange runs on the backend's own
/// connection threads, never on Swift's cooperative pool.
public final class WebDAVBackend: Backend {
    /// What the backend can do. `supportsConditionalWrites` is false even where the server
    /// checks `If-Match` (``conditions``): Apache `mod_dav` evaluates it when a `PUT` starts and
    /// renames the upload into place when it ends, so two writers from one version can both be
    /// taken (the conformance check `racingWritersWithOneBaseVersionOneWins` showed it).
    public let capabilities: BackendCapabilities
    /// Set when the server refused a `PUT` whose `If-Match` could not hold: it checks
    /// conditional headers itself, and the adapter need not check versions before a write.
    let conditions = Flag()
    /// The URL of the domain's root collection, without a trailing slash.
    public let baseURL: String
    /// The names of the root collection's path on the server (`["dav", "team"]`), to read hrefs.
    let basePath: [String]
    /// ``basePath`` percent-encoded as requests send it (`/dav/team`; empty for the server's
    /// root): an href that starts with these bytes has them decoded already
    /// (``relativePath(of:)``).
    let encodedBasePath: [UInt8]
    let client: HTTPClient
    /// The client for Nextcloud's chunked uploads (`…/remote.php/dav/uploads/<user>`), outside
    /// `url`; `nil` without `--vendor nextcloud` or when `url` is not `…/remote.php/dav/files/<user>/…`.
    let uploads: HTTPClient?
    /// Files larger than this go up in chunks of this size with ``uploads``.
    let chunkSize: Int64
    /// How many ranged `GET`s a large download sends at once (``RangedDownload``).
    let streamsPerDownload: Int
    /// The server's dialect: with `nextcloud` or `owncloud`, identifiers are the server's
    /// `oc:fileid` and contents carry `OC-Checksum`.
    public let vendor: WebDAVVendor
    /// Where items with stable identifiers were last seen (``vendor`` `nextcloud`/`owncloud`).
    let places = IdentifierMap()
    /// Parses listings off the cooperative pool.
    let parser = BlockingExecutor(name: "webdav-xml", threads: 1)
    /// Computes checksums of files, and does the file steps of ranged downloads
    /// (``RangedDownload/files``), off the cooperative pool.
    let hasher = BlockingExecutor(name: "webdav-hash", threads: 1)
    /// The server's last `quota-available-bytes` for the root.
    let quota = QuotaBox()
    /// Whether the server's listings give files an ETag or only a date and size.
    let versionForms = VersionForms()
    /// What listings held in memory, for tests.
    let listingMemory = ListingMemory()

    /// Connects to a WebDAV server and checks that `url` is a collection.
    ///
    /// - Parameters:
    ///   - url: the root collection, `http://` or `https://` (certificates are always verified).
    ///   - user: the user name for HTTP Basic authentication, or `nil`.
    ///   - password: the password, or `nil` (then `netrcFile`, if given, supplies both).
    ///   - netrcFile: a netrc file with the credentials for the host, or `nil`.
    ///   - caFile: a CA bundle to verify HTTPS certificates with, or `nil` for the system's.
    ///   - connectTimeout: seconds to wait for a connection.
    ///   - timeout: seconds without any byte moving before a transfer is abandoned (and retried).
    ///   - connections: how many connections (each on its own thread) run at once.
    ///   - retries: how many times a connection error, `429` or `5xx` is retried.
    ///   - vendor: the server's dialect (``WebDAVVendor``).
    ///   - chunkSize: with `vendor` `nextcloud`, files larger than this many bytes go up with
    ///     Nextcloud's chunked upload (v2) in chunks of this size (at least 4 KiB).
    ///   - probeFolder: a folder to remember what the probe of conditional writes found in
    ///     (``ProbeMemory``), so that it runs once per `url` and `user`; `nil` probes at every open.
    ///   - authenticationHint: what a refusal of the credentials adds to its message (where the
    ///     password came from, or which sources had none); `nil`: a hint naming the options.
    ///   - streamsPerDownload: how many ranged `GET`s a large download sends at once, at most
    ///     `connections`; `nil`: what suits the processors and where the server is
    ///     (``RangedDownload/streams(connections:url:processors:)``).
    /// - Throws: `invalidArgument` for a URL that is not http(s), a file that cannot be read,
    ///   out-of-range numbers, or a URL that is not a WebDAV collection; `serverUnreachable`
    ///   when the server cannot be reached; `notAuthenticated` when it refuses the credentials
    ///   or its certificate is not trusted; `noSuchItem` when nothing is at `url`.
    public init(
        url: String, user: String? = nil, password: String? = nil, netrcFile: String? = nil, caFile: String? = nil,
        connectTimeout: Double = 10, timeout: Double = 30, connections: Int = 4, retries: Int = 4,
        vendor: WebDAVVendor = .other, chunkSize: Int64 = 10 << 20, probeFolder: String? = nil,
        authenticationHint: String? = nil, streamsPerDownload: Int? = nil
    ) async throws(FileProviderError) {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        guard let parsed = URL(string: base), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
            parsed.host != nil, parsed.query == nil, parsed.fragment == nil
        else {
            throw FileProviderError(.invalidArgument, "--url must be an http:// or https:// URL of a collection, not '\(url)'")
        }
        let http = HTTPOptions(
            caFile: caFile, connectTimeout: connectTimeout, timeout: timeout, connections: connections, retries: retries)
        try http.check()
        if let netrcFile, !FileManager.default.isReadableFile(atPath: netrcFile) {
            throw FileProviderError(.invalidArgument, "--netrc-file: the file \(netrcFile) cannot be read")
        }
        guard chunkSize >= 4096 else {
            throw FileProviderError(.invalidArgument, "the chunk size must be at least 4096 bytes, not \(chunkSize)")
        }
        guard let path = Self.decodePath(parsed.path(percentEncoded: true)[...]) else {
            throw FileProviderError(.invalidArgument, "--url has a path that cannot be decoded: '\(url)'")
        }
        var settings = http.clientSettings(baseURL: base)
        if let password { settings.basicCredentials = (user ?? "", password) }
        settings.netrcFile = netrcFile
        settings.authenticationHint = authenticationHint ?? "check --user and the password (--password-env or --netrc-file)"
        settings.threadName = "webdav-http"
        client = try HTTPClient(settings: settings)
        if vendor == .nextcloud, let uploadsURL = Self.uploadsURL(of: parsed) {
            var uploadSettings = settings
            uploadSettings.baseURL = uploadsURL
            uploadSettings.threadName = "webdav-upload"
            do {
                uploads = try HTTPClient(settings: uploadSettings)
            } catch {
                client.close()
                throw error
            }
        } else {
            uploads = nil
        }
        self.chunkSize = chunkSize
        self.streamsPerDownload = min(
            connections, streamsPerDownload ?? RangedDownload.streams(connections: connections, url: base))
        baseURL = base
        basePath = path
        encodedBasePath = Array(path.map { "/" + HTTPClient.percentEncode($0, keepSlash: false) }.joined().utf8)
        self.vendor = vendor
        capabilities = BackendCapabilities(
            hasChangeFeed: false, supportsThumbnails: false, supportsRangedReads: true, supportsServerSideMove: true,
            supportsConditionalWrites: false, supportsSymlinks: false, creatableKinds: [.file, .folder],
            identifiersArePathDerived: !vendor.hasFileIDs, listsOnlySomeFiles: false, createsFetchDestinations: true,
            concurrentTransfers: connections)
        do {
            _ = try await rootItem()
            if try await checksConditions(memory: probeFolder.map(ProbeMemory.init(folder:)), user: user) { conditions.set() }
        } catch {
            client.close()
            uploads?.close()
            parser.shutDown()
            hasher.shutDown()
            throw error
        }
    }

    deinit {
        client.close()
        uploads?.close()
        parser.shutDown()
        hasher.shutDown()
    }

    /// Closes the connections and stops their threads.
    public func close() async {
        client.close()
        uploads?.close()
        parser.shutDown()
        hasher.shutDown()
    }

    // MARK: Requests

    /// Sends a request on the connection threads of `client` (the backend's own when `nil`);
    /// task cancellation aborts the transfer.
    func send(_ request: HTTPRequest, on client: HTTPClient? = nil) async throws(FileProviderError) -> HTTPReply {
        let flag = CancellationFlag()
        let client = client ?? self.client
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) in
            try await client.send(request, cancellation: flag)
        }
    }

    /// Sends `request`, then `next` on the same connection when the first succeeded
    /// (``HTTPClient/send(_:then:cancellation:)``); the reply to `next` is `nil` when it was not
    /// sent or needs sending again alone. Task cancellation aborts the transfer.
    func send(_ request: HTTPRequest, then next: HTTPRequest) async throws(FileProviderError) -> (HTTPReply, HTTPReply?) {
        let flag = CancellationFlag()
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) in
            let sent = try await client.send(request, then: next, cancellation: flag)
            return (sent.reply, sent.next)
        }
    }

    /// The uploads collection of Nextcloud's chunked upload for a URL under
    /// `…/remote.php/dav/files/<user>`: `…/remote.php/dav/uploads/<user>`; `nil` for any other URL.
    static func uploadsURL(of url: URL) -> String? {
        let parts = url.path(percentEncoded: true).split(separator: "/", omittingEmptySubsequences: true)
        guard
            let start = parts.indices.first(where: { index in
                index + 3 < parts.count && parts[index] == "remote.php" && parts[index + 1] == "dav" && parts[index + 2] == "files"
            }),
            let scheme = url.scheme, let host = url.host(percentEncoded: true)
        else { return nil }
        let authority = host.contains(":") ? "[\(host)]" : host
        let port = url.port.map { ":\($0)" } ?? ""
        let prefix = parts[..<(start + 2)].joined(separator: "/")
        return "\(scheme)://\(authority)\(port)/\(prefix)/uploads/\(parts[start + 3])"
    }

    /// The endpoint of a path, percent-encoded; a collection's ends in `/`.
    func endpoint(_ path: ItemPath, collection: Bool = false) -> String {
        if path.isRoot { return "/" }
        return "/" + HTTPClient.percentEncodedPath(path.components) + (collection ? "/" : "")
    }

    /// The full URL of a path, for `Destination`.
    func absoluteURL(_ path: ItemPath, collection: Bool = false) -> String { baseURL + endpoint(path, collection: collection) }

    /// The names of a percent-encoded URL path; `nil` when a name does not decode to UTF-8.
    static func decodePath(_ path: Substring) -> [String]? {
        // One pass over the bytes in place (every entry of a listing comes here): a name ends
        // at a `/`.
        var path = path
        return path.withUTF8 { bytes -> [String]? in
            var names: [String] = []
            var start = 0
            for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: "/") {
                if start < index {
                    guard let name = HTTPText.percentDecoded(UnsafeBufferPointer(rebasing: bytes[start..<index])) else { return nil }
                    names.append(name)
                }
                start = index + 1
            }
            return names
        }
    }
}

/// The dialect of a WebDAV server (`--vendor`).
public enum WebDAVVendor: String, Sendable, CaseIterable {
    /// Nextcloud: `oc:fileid` identifiers, `OC-Checksum`.
    case nextcloud
    /// ownCloud: `oc:fileid` identifiers, `OC-Checksum`.
    case owncloud
    /// Any other server: path-derived identifiers, plain RFC 4918.
    case other

    /// Whether the server gives every item a stable `oc:fileid`.
    var hasFileIDs: Bool { self != .other }
}

/// A flag set once, read from any thread.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    var isSet: Bool { lock.withLock { value } }

    func set() { lock.withLock { value = true } }
}

/// The bytes the server last said are available (`quota-available-bytes` of the root), or
/// `nil` when it did not say.
final class QuotaBox: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: Int64?

    var available: Int64? { lock.withLock { bytes } }

    func set(_ value: Int64?) { lock.withLock { bytes = value } }
}

extension WebDAVBackend {
    /// The bytes the server said are available for the domain, from the last listing of the
    /// root; `nil` when the server does not say (or said something impossible).
    public var availableBytes: Int64? { quota.available }

    /// Records `quota-available-bytes`: a number from 0 to ``ProviderCore/ItemBounds/maximumSize``;
    /// anything else (RFC 4331's negative "unknown", text) means unknown.
    func updateQuota(_ text: String) {
        guard let value = Int64(text), ItemBounds.problem(withSize: value) == nil else {
            quota.set(nil)
            return
        }
        quota.set(value)
    }
}

/// What the listings of a backend held, for tests that check a reply is never in memory whole:
/// the largest reply body kept in memory (none, since replies are spooled to a file), the
/// largest reply spooled, and the reads the parser made from the spool.
final class ListingMemory: Sendable {
    let reads = ReadCounter()
    private let bodies = ReadCounter()
    private let spooled = ReadCounter()

    /// The most bytes of a listing's reply body held in memory.
    var largestBodyInMemory: Int { bodies.largest }
    /// The longest listing reply, in bytes (spooled to a file).
    var largestReply: Int { spooled.largest }

    func record(reply: HTTPReply) {
        bodies.record(reply.body.count)
        spooled.record(Int(clamping: reply.fileLength))
    }
}
