import AdapterKit
import Foundation
import ProviderCore

/// A backend over an S3 bucket (AWS S3 and the stores that speak its protocol: SeaweedFS,
/// Ceph RGW, MinIO, Garage, Backblaze B2, Wasabi, Cloudflare R2), through the adapter kit's
/// libcurl client, every request signed by libcurl (AWS Signature Version 4).
///
/// Identifiers are paths relative to the domain's root, `prefix` in the bucket (`docs/a.txt`
/// is the key `PREFIX` + `docs/a.txt`). A folder is a common prefix of keys or a `name/`
/// marker object; a folder created here is a marker. A file's content version is its ETag, and
/// its version id in a versioned bucket (``S3ContentVersion``).
/// Listings are `ListObjectsV2` with `delimiter=/`, 1,000 keys a page, continuation tokens as
/// ``ProviderCore/Page``. A rename or move is `CopyObject` of every key then `DeleteObject` of
/// every old key (copies first: a crash leaves both, never neither). Every HTTP exchange runs
/// on the backend's own connection threads, never on Swift's cooperative pool.
public final class S3Backend: FlatListing {
    /// What the backend can do. `supportsConditionalWrites` says what the store answered to
    /// the probe when the backend connected (``probeConditionalWrites(client:prefix:)``).
    public let capabilities: BackendCapabilities
    /// The bucket.
    public let bucket: String
    /// The key prefix of the domain's root: empty, or ending in `/`.
    public let prefix: String
    /// The URL requests go to: the bucket's (`https://BUCKET.s3.REGION.amazonaws.com`, or
    /// `ENDPOINT/BUCKET` with path-style addressing).
    public let bucketURL: String
    /// The path of the bucket in request URLs, for `x-amz-copy-source` (`/BUCKET`).
    let copySourceBase: String
    let client: HTTPClient
    /// Parses listings and hashes files off the cooperative pool.
    let worker = BlockingExecutor(name: "s3-work", threads: 1)
    /// Hashes files and parts of files (MD5, SHA-256) off the cooperative pool, two at once.
    let hashers = BlockingExecutor(name: "s3-hash", threads: 2)
    /// When uploads go in parts, and how big the parts are.
    let multipart: MultipartSettings
    /// Whether the engine lists the bucket at once (``enumerateAllItems(startingAt:)``)
    /// rather than folder by folder (`flat-listing`; off by default: the pages come one after
    /// another, while the folder walk runs 8 listings at once).
    public let listsFlat: Bool
    /// Whether the bucket keeps versions (`GetBucketVersioning` said `Enabled` or `Suspended`
    /// when the backend connected): then listings are `ListObjectVersions`, content versions
    /// carry version ids and downloads ask for the version they want (``S3ContentVersion``).
    public let versioned: Bool
    /// The multipart uploads this backend is sending.
    let activeUploads = ActiveUploads()
    /// Folders seen a moment ago: the parent of each new file is listed once per batch.
    let knownFolders = KnownFolders()

    /// The version of every folder: folders have no ETag of their own.
    static let folderVersion = ItemVersion(content: Data("folder".utf8), metadata: Data())
    /// The most keys one listing request asks for (S3's own maximum).
    static let pageSize = 1000

    /// Connects to a bucket and checks it can be listed.
    ///
    /// - Parameters:
    ///   - endpoint: the server's URL, `http://` or `https://`; `nil` for AWS in `region`.
    ///   - bucket: the bucket's name.
    ///   - prefix: a folder in the bucket to use as the domain's root (`team/docs`), or empty.
    ///   - region: the region requests are signed for.
    ///   - pathStyle: address the bucket as `ENDPOINT/BUCKET` rather than `BUCKET.ENDPOINT`
    ///     (what most self-hosted stores want).
    ///   - credentials: the keys, or `nil` to send requests unsigned (a public bucket).
    ///   - http: the kit's connection options.
    ///   - multipart: when uploads go in parts and how big they are.
    ///   - listsFlat: whether a sync lists the whole bucket at once (`false`: folder by folder).
    ///   - authenticationHint: what a refusal adds to its message (where the keys came from).
    /// - Throws: `invalidArgument` for an endpoint that is not http(s), a bucket name S3 does
    ///   not allow, a prefix with an empty or unsafe folder name, out-of-range numbers (also in
    ///   `multipart`);
    ///   `serverUnreachable` when the server cannot be reached; `notAuthenticated` when it
    ///   refuses the keys; `noSuchItem` when the bucket does not exist.
    public init(
        endpoint: String?, bucket: String, prefix: String = "", region: String = "us-east-1", pathStyle: Bool = false,
        credentials: (accessKey: String, secretKey: String, sessionToken: String?)?, http: HTTPOptions = HTTPOptions(),
        authenticationHint: String? = nil, multipart: MultipartSettings = MultipartSettings(), listsFlat: Bool = false
    ) async throws(FileProviderError) {
        try multipart.check()
        self.multipart = multipart
        self.listsFlat = listsFlat
        guard Self.isValidBucketName(bucket) else {
            throw FileProviderError(
                .invalidArgument, "--bucket: '\(bucket)' is not a bucket name (3 to 63 lower-case letters, digits, dots and dashes)")
        }
        guard !region.isEmpty,
            region.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) })
        else {
            throw FileProviderError(.invalidArgument, "--region: '\(region)' is not a region name (such as us-east-1)")
        }
        var folders: [String] = []
        for part in prefix.split(separator: "/", omittingEmptySubsequences: true) {
            let name = String(part)
            guard Filename.isValid(name) else {
                throw FileProviderError(.invalidArgument, "--prefix: '\(name)' cannot be a folder name")
            }
            folders.append(name)
        }
        self.prefix = folders.isEmpty ? "" : folders.joined(separator: "/") + "/"
        let base = endpoint ?? "https://s3.\(region).amazonaws.com"
        var trimmed = base
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let parsed = URL(string: trimmed), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = parsed.host, parsed.query == nil, parsed.fragment == nil, parsed.path.isEmpty || parsed.path == "/"
        else {
            throw FileProviderError(.invalidArgument, "--endpoint must be an http:// or https:// URL without a path, not '\(base)'")
        }
        // An address or localhost has no bucket subdomains: path-style there whatever is asked.
        let isAddress =
            host == "localhost" || host.contains(":") || host.utf8.allSatisfy { $0 == UInt8(ascii: ".") || (0x30...0x39).contains($0) }
        if pathStyle || isAddress || bucket.contains(".") && scheme == "https" {
            bucketURL = trimmed + "/" + bucket
            copySourceBase = "/" + bucket
        } else {
            let port = parsed.port.map { ":\($0)" } ?? ""
            bucketURL = "\(scheme)://\(bucket).\(host)\(port)"
            copySourceBase = "/" + bucket
        }
        self.bucket = bucket
        try http.check()
        var settings = http.clientSettings(baseURL: bucketURL)
        if let credentials {
            settings.awsSignature = AWSSignature(
                region: region, accessKey: credentials.accessKey, secretKey: credentials.secretKey,
                sessionToken: credentials.sessionToken)
        }
        settings.authenticationHint =
            authenticationHint
            ?? (credentials == nil
                ? "no credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give --profile"
                : "check the access key and secret key")
        settings.threadName = "s3-http"
        let client = try HTTPClient(settings: settings)
        self.client = client
        let conditional: Bool
        do {
            conditional = try await Self.probeConditionalWrites(client: client, prefix: self.prefix)
            versioned = try await Self.probeVersioning(client: client)
        } catch {
            client.close()
            worker.shutDown()
            hashers.shutDown()
            throw error
        }
        capabilities = BackendCapabilities(
            hasChangeFeed: false, supportsThumbnails: false, supportsRangedReads: true, supportsServerSideMove: true,
            supportsConditionalWrites: conditional, supportsSymlinks: false, creatableKinds: [.file, .folder],
            maximumUploadSize: MultipartSettings.maximumObjectSize, identifiersArePathDerived: true, listsOnlySomeFiles: false,
            createsFetchDestinations: true, concurrentTransfers: client.settings.connections)
        do {
            _ = try await listPage(prefix: self.prefix, delimiter: true, token: nil, maxKeys: 1)
        } catch {
            client.close()
            worker.shutDown()
            hashers.shutDown()
            throw error
        }
    }

    deinit {
        client.close()
        worker.shutDown()
        hashers.shutDown()
    }

    /// Closes the connections and stops their threads.
    public func close() async {
        client.close()
        worker.shutDown()
        hashers.shutDown()
    }

    /// Whether the store honours `If-Match` on `PutObject`: a `PUT` of an empty object at a key
    /// that is not there (`PREFIX.fileprovider-probe-UUID`) with `If-Match` on an ETag no
    /// object has. A store that honours it refuses with `412` (SeaweedFS 4.48) or `404`
    /// `NoSuchKey` (moto 5.2.1, AWS) and writes nothing; one that ignores it writes the object,
    /// which is deleted again. Any other answer (`403` for keys that may not write, a missing
    /// bucket) says no: the listing after it gives the reason.
    ///
    /// - Throws: `serverUnreachable` when the server cannot be reached; `cancelled`.
    static func probeConditionalWrites(client: HTTPClient, prefix: String) async throws(FileProviderError) -> Bool {
        let key = prefix + ".fileprovider-probe-\(UUID().uuidString.lowercased())"
        let endpoint = "/" + HTTPClient.percentEncode(key, keepSlash: true)
        var request = HTTPRequest("PUT", endpoint)
        request.body = .data(Data(), contentType: "application/octet-stream")
        request.headers = ["If-Match: \"\(String(repeating: "0", count: 32))\""]
        request.finalStatuses = [412]
        let reply = try await client.send(request, cancellation: CancellationFlag())
        if reply.status == 412 { return true }
        if reply.status == 404 { return S3ErrorBody.parse(reply.body).code == "NoSuchKey" }
        if reply.isSuccess { _ = try? await client.send(HTTPRequest("DELETE", endpoint), cancellation: CancellationFlag()) }
        return false
    }

    /// Whether the bucket keeps versions: `GetBucketVersioning` (`GET ?versioning`) says
    /// `Enabled`, or `Suspended` (its objects may have versions still), in a
    /// `VersioningConfiguration` (moto 5.2.1: `GetBucketVersioningResponse`). Any other answer, or a
    /// refusal (keys that may not read the bucket's settings), says no: listings are then
    /// `ListObjectsV2` and versions ETags alone, as in a bucket without versions.
    ///
    /// A store that answers the probe with an error after the kit's retries (`5xx`) is taken as
    /// one without versions for the session, as the conditional-write probe does.
    ///
    /// - Throws: `serverUnreachable` when the server cannot be reached; `cancelled`.
    static func probeVersioning(client: HTTPClient) async throws(FileProviderError) -> Bool {
        var request = HTTPRequest("GET", HTTPClient.canonicalQuery([("versioning", "")]))
        request.sink = .memory(limit: 64 << 10)
        request.finalStatuses = []
        let reply = try await client.send(request, cancellation: CancellationFlag())
        // moto 5.2.1 names the reply GetBucketVersioningResponse.
        guard reply.isSuccess, let records = S3Records.parse(reply.body),
            ["VersioningConfiguration", "GetBucketVersioningResponse"].contains(records.root)
        else {
            return false
        }
        let status = records.fields["Status"]?.trimmingCharacters(in: .whitespaces)
        return status == "Enabled" || status == "Suspended"
    }

    /// Whether S3 allows `name` as a bucket name: 3 to 63 characters, lower-case letters,
    /// digits, dots and dashes, starting and ending with a letter or digit.
    static func isValidBucketName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count) else { return false }
        func alnum(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) || (0x61...0x7A).contains(byte) }
        guard alnum(bytes.first!), alnum(bytes.last!) else { return false }
        return bytes.allSatisfy { alnum($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }

    // MARK: Requests

    /// Sends a request on the backend's connection threads; task cancellation aborts the
    /// transfer.
    func send(_ request: HTTPRequest) async throws(FileProviderError) -> HTTPReply {
        let flag = CancellationFlag()
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) in
            try await client.send(request, cancellation: flag)
        }
    }

    /// Throws the error a failed reply means (``S3ErrorMapping``).
    func check(_ reply: HTTPReply) throws(FileProviderError) { try S3ErrorMapping.check(reply, bucket: bucket) }

    /// The key of a path: the prefix and its names joined with `/`; a folder's ends in `/`
    /// (the root's is the prefix).
    func key(_ path: ItemPath, folder: Bool = false) -> String {
        if path.isRoot { return prefix }
        return prefix + path.components.joined(separator: "/") + (folder ? "/" : "")
    }

    /// The endpoint of a key, percent-encoded (`/` kept), with a canonical query.
    func endpoint(key: String, query: [(String, String)] = []) -> String {
        "/" + HTTPClient.percentEncode(key, keepSlash: true) + HTTPClient.canonicalQuery(query)
    }

    /// `x-amz-copy-source` of a key: `/BUCKET/KEY`, percent-encoded.
    func copySource(key: String) -> String { copySourceBase + "/" + HTTPClient.percentEncode(key, keepSlash: true) }
}
