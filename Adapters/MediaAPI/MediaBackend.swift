import AdapterKit
import Foundation
import ProviderCore

/// A backend over the HTTP media API (Docs/MediaAPI.md), talking HTTP through libcurl.
///
/// It works against the original API (names and sizes of folders and images only, no ETag,
/// a 25 MiB upload limit, no rename) and uses our extensions when the server offers them in
/// `GET /capabilities` (typed listings with ETags, conditional and atomic uploads, moves,
/// previews of any size); ``dialect`` says which, and ``capabilities`` declares what follows.
///
/// Identifiers are paths relative to the domain's root folder on the server (`2024/beach.jpg`);
/// the root folder is ``ItemIdentifier/rootContainer``. Every HTTP exchange runs on the
/// backend's own connection threads (option `connections`), never on Swift's cooperative pool.
public final class MediaBackend: Backend {
    /// Which API the server speaks.
    public enum Dialect: String, Sendable {
        /// The original media API.
        case original
        /// The original API plus our extensions.
        case extended
    }

    /// The largest upload the original API accepts.
    public static let originalUploadLimit: Int64 = 25 << 20
    /// The thumbnail size of the original API's `/preview`.
    public static let originalPreviewSize = 120

    public let dialect: Dialect
    public let capabilities: BackendCapabilities
    /// The base URL, without a trailing slash.
    public let baseURL: String
    /// The domain's root folder on the server, as names (empty for the server's root).
    let rootComponents: [String]
    /// The domain's root folder on the server, `a/b` (empty for the server's root): what
    /// `init(url:root:…)` was given, without empty or `.` parts. Another `MediaBackend` with the
    /// same ``baseURL`` and root sees the same store.
    public var root: String { rootComponents.joined(separator: "/") }
    /// The most items one listing page holds (extended servers page on the server; with the
    /// original API a listing is one page).
    public let pageSize: Int
    let client: HTTPClient
    let maximumPreviewSize: Int

    /// Connects to a media server and finds out which API it speaks.
    ///
    /// - Parameters:
    ///   - url: the server's base URL, `http://` or `https://` (certificates are always verified).
    ///   - root: a folder on the server to use as the domain's root; empty for the server's root.
    ///   - token: a bearer token sent with every request, or `nil`.
    ///   - caFile: a CA bundle to verify HTTPS certificates with, or `nil` for the system's.
    ///   - connectTimeout: seconds to wait for a connection.
    ///   - timeout: seconds without any byte moving before a transfer is abandoned (and retried).
    ///   - connections: how many connections (each on its own thread) run at once.
    ///   - retries: how many times a connection error, `429` or `5xx` is retried.
    ///   - pageSize: the most items per listing page, at least 1.
    /// - Throws: `invalidArgument` for a URL that is not http(s), a CA file that does not exist,
    ///   out-of-range numbers, or a server that does not speak the media API;
    ///   `serverUnreachable` when the server cannot be reached; `notAuthenticated` when it
    ///   refuses the token or its certificate is not trusted.
    public init(
        url: String, root: String = "", token: String? = nil, caFile: String? = nil, connectTimeout: Double = 10,
        timeout: Double = 30, connections: Int = 4, retries: Int = 4, pageSize: Int = 1000
    ) async throws(FileProviderError) {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        guard let parsed = URL(string: base), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
            parsed.host != nil
        else {
            throw FileProviderError(.invalidArgument, "--url must be an http:// or https:// URL, not '\(url)'")
        }
        let http = HTTPOptions(
            caFile: caFile, connectTimeout: connectTimeout, timeout: timeout, connections: connections, retries: retries)
        try http.check()
        guard pageSize >= 1 else {
            throw FileProviderError(.invalidArgument, "the page size must be at least 1, not \(pageSize)")
        }
        var names: [String] = []
        for part in root.split(separator: "/", omittingEmptySubsequences: true) where part != "." {
            let name = String(part)
            guard Filename.isValid(name) else {
                throw FileProviderError(.invalidArgument, "--root \(root.debugDescription) has an unsafe name")
            }
            names.append(name)
        }
        var settings = http.clientSettings(baseURL: base)
        settings.token = token
        settings.authenticationHint = "check the bearer token (--token-env)"
        settings.threadName = "media-http"
        let client = try HTTPClient(settings: settings)
        let document: CapabilitiesDocument?
        do {
            document = try await Self.discover(client)
        } catch {
            client.close()
            throw error
        }
        self.client = client
        baseURL = base
        rootComponents = names
        self.pageSize = pageSize
        if let document {
            dialect = .extended
            maximumPreviewSize = document.maxPreviewSize ?? 1024
            capabilities = BackendCapabilities(
                hasChangeFeed: false, supportsThumbnails: document.extensions.contains("preview-sizes"),
                supportsRangedReads: true, supportsServerSideMove: true, supportsConditionalWrites: true,
                supportsSymlinks: false, creatableKinds: [.file, .folder], maximumUploadSize: document.maxUploadSize,
                identifiersArePathDerived: true, listsOnlySomeFiles: false, createsFetchDestinations: true)
        } else {
            dialect = .original
            maximumPreviewSize = Self.originalPreviewSize
            capabilities = BackendCapabilities(
                hasChangeFeed: false, supportsThumbnails: true, supportsRangedReads: true,
                supportsServerSideMove: false, supportsConditionalWrites: false, supportsSymlinks: false,
                creatableKinds: [.file, .folder], maximumUploadSize: Self.originalUploadLimit,
                identifiersArePathDerived: true, listsOnlySomeFiles: true, createsFetchDestinations: true)
        }
    }

    deinit { client.close() }

    /// Closes the connections and stops their threads.
    public func close() async { client.close() }

    /// The extensions a server needs for the extended dialect.
    static let requiredExtensions: Set<String> = [
        "typed-listing", "listing-pages", "stat", "etag", "conditional-writes", "atomic-uploads", "move",
        "conditional-delete",
    ]

    /// `GET /capabilities`; `nil` for a server that speaks the original API only.
    private static func discover(_ client: HTTPClient) async throws(FileProviderError) -> CapabilitiesDocument? {
        let flag = CancellationFlag()
        let reply = try await client.send(HTTPRequest("GET", "/capabilities"), cancellation: flag)
        if reply.isSuccess, let document = try? reply.decode(CapabilitiesDocument.self), document.api == "media",
            requiredExtensions.isSubset(of: document.extensions)
        {
            return document
        }
        if reply.status == 401 || reply.status == 403 || (500...599).contains(reply.status) { try reply.check() }
        // The original API: GET / answers {"message": "Hello world!"}.
        let hello = try await client.send(HTTPRequest("GET", "/"), cancellation: flag)
        try hello.check()
        guard (try? hello.decode(ErrorReply.self))?.message != nil else {
            throw FileProviderError(
                .invalidArgument, "\(client.settings.baseURL) does not look like a media API server (GET / did not answer its greeting)")
        }
        return nil
    }

    // MARK: Requests

    /// Sends a request on the connection threads; task cancellation aborts the transfer.
    func send(_ request: HTTPRequest) async throws(FileProviderError) -> HTTPReply {
        let flag = CancellationFlag()
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) in
            try await client.send(request, cancellation: flag)
        }
    }

    /// The server path of a folder of the domain, for `path=`.
    func serverPath(_ path: MediaPath) -> String {
        (rootComponents + path.components).joined(separator: "/")
    }

    /// `path=` (the parent folder) and `id=` (the name) of an item.
    func itemQuery(_ path: MediaPath) -> [(String, String)] {
        [("path", serverPath(path.parent)), ("id", path.name)]
    }

    // MARK: Backend

    /// Returns the current metadata of one item.
    ///
    /// With the original API a file's version comes from a one-byte ranged `GET` (size and
    /// `Last-Modified`), a folder's from listing it.
    /// - Throws: `noSuchItem` when nothing is at the identifier's path (with the original API,
    ///   also for files it does not list: anything but `.jpg`, `.jpeg` and `.png`).
    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        let path = try MediaPath(identifier)
        if path.isRoot { return try await rootItem() }
        switch dialect {
        case .extended:
            let reply = try await send(HTTPRequest("GET", "/stat", query: itemQuery(path)))
            try reply.check()
            let entry = try reply.decode(ListingEntry.self)
            guard let item = try makeItem(entry, in: path.parent), item.filename.utf8.elementsEqual(path.name.utf8) else {
                throw FileProviderError(.corruptData, "the server described \(path.display) as \(entry.name.debugDescription)")
            }
            return item
        case .original:
            return try await originalItem(at: path)
        }
    }
}
