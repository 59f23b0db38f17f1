import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

// The XML of S3's REST API as it comes over the wire: a ListObjectsV2 reply
// (`ListBucketResult`), a ListObjectVersions reply (`ListVersionsResult`) and an error reply
// (`Error`), parsed with XMLParser's streaming
// callbacks. Values are kept as the server sent them; S3Backend+Items.swift checks them where
// they become items.

/// One `<Contents>` of a listing (an object), or one `<Version>` or `<DeleteMarker>` of a
/// listing of versions.
struct S3Object: Sendable {
    var key = ""
    var size: String?
    var etag: String?
    var lastModified: String?
    var storageClass: String?
    /// The version id (`<VersionId>`, listings of versions only).
    var versionID: String?
    /// Whether this is the key's current version (`<IsLatest>`; `nil` when a listing of
    /// versions did not say; always so in a ListObjectsV2 listing).
    var isLatest: Bool? = true
    /// Whether this is a delete marker (`<DeleteMarker>`): the key was deleted.
    var isDeleteMarker = false

    /// Whether the entry is an object the bucket holds now: the current version, not a delete
    /// marker.
    var isCurrentObject: Bool { isLatest == true && !isDeleteMarker }
}

/// A `ListBucketResult` (ListObjectsV2) or a `ListVersionsResult` (ListObjectVersions).
struct S3Listing: Sendable {
    var prefix: String?
    /// Every entry: in a listing of versions, older versions and delete markers as well.
    var objects: [S3Object] = []
    var commonPrefixes: [String] = []
    var isTruncated = false
    var nextContinuationToken: String?
    /// Where the next page of a listing of versions starts (`NextKeyMarker`,
    /// `NextVersionIdMarker`).
    var nextKeyMarker: String?
    var nextVersionIDMarker: String?
    /// `</ListBucketResult>` or `</ListVersionsResult>` was read: the reply is complete.
    var complete = false

    /// Where the next page of a listing of versions starts, as one token: the version id
    /// marker (no space in it), a space, the key marker; `nil` without a key marker.
    var versionsToken: String? {
        guard let key = nextKeyMarker, !key.isEmpty else { return nil }
        let id = nextVersionIDMarker ?? ""
        guard !id.utf8.contains(0x20) else { return nil }
        return id + " " + key
    }
}

/// An `<Error>` reply: its `Code` and `Message`.
struct S3ErrorBody: Sendable {
    var code: String?
    var message: String?

    /// The error of a reply body, or an empty one when it is not S3's error XML (a `HEAD`'s
    /// reply has no body).
    static func parse(_ data: Data) -> S3ErrorBody {
        let delegate = S3XMLReader()
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        parser.shouldProcessNamespaces = false
        _ = parser.parse()
        return S3ErrorBody(code: delegate.errorCode, message: delegate.errorMessage)
    }
}

/// Why a listing could not be read.
struct S3ListingError: Error {
    var reason: String
}

extension S3Listing {
    /// The listing in a reply body.
    ///
    /// - Throws: ``S3ListingError`` when the body is not well-formed XML, is not a
    ///   `ListBucketResult` (a `ListVersionsResult` with `versions`) or is cut off, or holds
    ///   more than `limit` entries.
    static func parse(_ data: Data, limit: Int, versions: Bool = false) throws(S3ListingError) -> S3Listing {
        let delegate = S3XMLReader(limit: limit, root: versions ? "ListVersionsResult" : "ListBucketResult")
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        parser.shouldProcessNamespaces = false
        let parsed = parser.parse()
        if delegate.tooMany { throw S3ListingError(reason: "the listing holds more than \(limit) entries") }
        guard parsed else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown"
            throw S3ListingError(reason: "the listing is not well-formed XML (\(reason))")
        }
        guard delegate.listing.complete else { throw S3ListingError(reason: "the reply is not a complete \(delegate.root)") }
        return delegate.listing
    }
}

/// The XMLParser delegate of both replies; element names without their namespace prefix.
private final class S3XMLReader: NSObject, XMLParserDelegate {
    let limit: Int
    /// The root element of the listing read (`ListBucketResult` or `ListVersionsResult`).
    let root: String
    var listing = S3Listing()
    var errorCode: String?
    var errorMessage: String?
    var tooMany = false
    private var path: [String] = []
    private var object: S3Object?
    private var text = ""

    init(limit: Int = .max, root: String = "ListBucketResult") {
        self.limit = limit
        self.root = root
    }

    /// The elements of one entry: objects in a ListObjectsV2 listing, versions and delete
    /// markers in a listing of versions.
    private var entryNames: Set<String> { root == "ListVersionsResult" ? ["Version", "DeleteMarker"] : ["Contents"] }

    private static func local(_ name: String) -> String {
        if let colon = name.lastIndex(of: ":") { return String(name[name.index(after: colon)...]) }
        return name
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        let name = Self.local(elementName)
        path.append(name)
        text = ""
        if path.count == 2 && path[0] == root && entryNames.contains(name) {
            object = S3Object()
            object?.isDeleteMarker = name == "DeleteMarker"
            if root == "ListVersionsResult" { object?.isLatest = nil }
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        let name = Self.local(elementName)
        defer {
            path.removeLast()
            text = ""
        }
        let root = path.first ?? ""
        if root == "Error" && path.count == 2 {
            if name == "Code" { errorCode = text }
            if name == "Message" { errorMessage = text }
            return
        }
        guard root == self.root else { return }
        let inEntry = path.count == 3 && entryNames.contains(path[1])
        switch (path.count, name) {
        case (1, _): listing.complete = true
        case (2, "Prefix"): listing.prefix = text
        case (2, "IsTruncated"): listing.isTruncated = text.trimmingCharacters(in: .whitespaces).lowercased() == "true"
        case (2, "NextContinuationToken"): listing.nextContinuationToken = text
        case (2, "NextKeyMarker"): listing.nextKeyMarker = text
        case (2, "NextVersionIdMarker"): listing.nextVersionIDMarker = text
        case (2, _) where entryNames.contains(name):
            if let object { add { listing.objects.append(object) } }
            object = nil
        case (3, "Key") where inEntry: object?.key = text
        case (3, "Size") where inEntry: object?.size = text
        case (3, "ETag") where inEntry: object?.etag = text
        case (3, "LastModified") where inEntry: object?.lastModified = text
        case (3, "StorageClass") where inEntry: object?.storageClass = text
        case (3, "VersionId") where inEntry: object?.versionID = text
        case (3, "IsLatest") where inEntry: object?.isLatest = text.trimmingCharacters(in: .whitespaces).lowercased() == "true"
        case (3, "Prefix") where path[1] == "CommonPrefixes": add { listing.commonPrefixes.append(text) }
        default: break
        }
        if tooMany { parser.abortParsing() }
    }

    private func add(_ body: () -> Void) {
        if listing.objects.count + listing.commonPrefixes.count >= limit {
            tooMany = true
            return
        }
        body()
    }
}
