import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

// The XML of S3's REST API as it comes over the wire: a ListObjectsV2 reply
// (`ListBucketResult`) and an error reply (`Error`), parsed with XMLParser's streaming
// callbacks. Values are kept as the server sent them; S3Backend+Items.swift checks them where
// they become items.

/// One `<Contents>` of a listing: an object.
struct S3Object: Sendable {
    var key = ""
    var size: String?
    var etag: String?
    var lastModified: String?
    var storageClass: String?
}

/// A `ListBucketResult` (ListObjectsV2).
struct S3Listing: Sendable {
    var prefix: String?
    var objects: [S3Object] = []
    var commonPrefixes: [String] = []
    var isTruncated = false
    var nextContinuationToken: String?
    /// `</ListBucketResult>` was read: the reply is complete.
    var complete = false
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
    ///   `ListBucketResult` or is cut off, or holds more than `limit` entries.
    static func parse(_ data: Data, limit: Int) throws(S3ListingError) -> S3Listing {
        let delegate = S3XMLReader(limit: limit)
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        parser.shouldProcessNamespaces = false
        let parsed = parser.parse()
        if delegate.tooMany { throw S3ListingError(reason: "the listing holds more than \(limit) entries") }
        guard parsed else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown"
            throw S3ListingError(reason: "the listing is not well-formed XML (\(reason))")
        }
        guard delegate.listing.complete else { throw S3ListingError(reason: "the reply is not a complete ListBucketResult") }
        return delegate.listing
    }
}

/// The XMLParser delegate of both replies; element names without their namespace prefix.
private final class S3XMLReader: NSObject, XMLParserDelegate {
    let limit: Int
    var listing = S3Listing()
    var errorCode: String?
    var errorMessage: String?
    var tooMany = false
    private var path: [String] = []
    private var object: S3Object?
    private var text = ""

    init(limit: Int = .max) { self.limit = limit }

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
        if name == "Contents" && path.count == 2 { object = S3Object() }
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
        guard root == "ListBucketResult" else { return }
        switch (path.count, name) {
        case (1, _): listing.complete = true
        case (2, "Prefix"): listing.prefix = text
        case (2, "IsTruncated"): listing.isTruncated = text.trimmingCharacters(in: .whitespaces).lowercased() == "true"
        case (2, "NextContinuationToken"): listing.nextContinuationToken = text
        case (2, "Contents"):
            if let object { add { listing.objects.append(object) } }
            object = nil
        case (3, "Key") where path[1] == "Contents": object?.key = text
        case (3, "Size") where path[1] == "Contents": object?.size = text
        case (3, "ETag") where path[1] == "Contents": object?.etag = text
        case (3, "LastModified") where path[1] == "Contents": object?.lastModified = text
        case (3, "StorageClass") where path[1] == "Contents": object?.storageClass = text
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
