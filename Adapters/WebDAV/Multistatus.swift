import AdapterKit
import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

// The XML of WebDAV (RFC 4918) as it comes over the wire: the PROPFIND request body and the
// `207 Multi-Status` reply, parsed with XMLParser's streaming (SAX) callbacks. Values are kept
// as the server sent them; WebDAVBackend+Items.swift checks them where they become items.

/// The PROPFIND body: the properties the adapter reads, nothing more (`allprop` would make
/// servers compute expensive ones).
let propfindBody = Data(
    """
    <?xml version="1.0" encoding="utf-8"?>
    <d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">
      <d:prop>
        <d:resourcetype/><d:getcontentlength/><d:getlastmodified/><d:creationdate/><d:getetag/>
        <d:getcontenttype/><d:quota-available-bytes/><oc:fileid/>
      </d:prop>
    </d:propfind>
    """.utf8)

/// One `<d:response>`: its `href` and the properties of its `200` propstat.
struct DAVResponse: Sendable {
    var href = ""
    var isCollection = false
    var contentLength: String?
    var lastModified: String?
    var creationDate: String?
    var etag: String?
    var contentType: String?
    var quotaAvailable: String?
    var fileID: String?
}

/// Parses a multistatus body into its responses.
final class MultistatusParser: NSObject, XMLParserDelegate {
    private static let dav = "DAV:"
    private static let owncloud = "http://owncloud.org/ns"

    /// The most responses one reply may hold (a folder of ``ProviderCore/ItemBounds/maximumEntriesPerFolder``
    /// entries and itself).
    let limit: Int
    private(set) var responses: [DAVResponse] = []
    private(set) var tooMany = false
    /// `</multistatus>` was read: the reply is complete.
    private(set) var complete = false
    private var current: DAVResponse?
    /// The properties of the propstat being read, applied only when its status is 200.
    private var pending = DAVResponse()
    private var propstatStatus: String?
    private var text = ""
    private var inProp = false

    init(limit: Int) { self.limit = limit }

    /// The responses of a multistatus body in memory.
    ///
    /// - Throws: `MultistatusError` when the body is not well-formed XML or holds more than
    ///   `limit` responses.
    static func parse(_ data: Data, limit: Int) throws -> [DAVResponse] {
        try parse(XMLParser(data: data), limit: limit)
    }

    /// The responses of a multistatus body in a file, read in chunks (swift-corelibs-foundation's
    /// `XMLParser(stream:)` reads 128 KiB at a time into libxml2's push parser), so the body is
    /// never in memory whole.
    ///
    /// - Throws: `MultistatusError` when the file cannot be read, the body is not well-formed
    ///   XML or holds more than `limit` responses.
    static func parse(file path: String, limit: Int, reads: ReadCounter? = nil) throws -> [DAVResponse] {
        guard let file = InputStream(fileAtPath: path) else {
            throw MultistatusError(message: "the reply could not be read back")
        }
        return try parse(XMLParser(stream: reads.map { CountingInputStream(file, counter: $0) } ?? file), limit: limit)
    }

    private static func parse(_ parser: XMLParser, limit: Int) throws -> [DAVResponse] {
        let delegate = MultistatusParser(limit: limit)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = delegate
        let ok = parser.parse()
        if delegate.tooMany { throw MultistatusError(message: "more than \(limit) entries") }
        guard ok else {
            let detail = parser.parserError.map { "\($0)" } ?? "unknown error"
            throw MultistatusError(message: "the reply is not well-formed XML (\(detail.prefix(200)))")
        }
        guard delegate.complete else {
            throw MultistatusError(message: "the reply is not a complete multistatus body (no </multistatus>)")
        }
        return delegate.responses
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        text = ""
        guard namespaceURI == Self.dav else { return }
        switch elementName {
        case "response":
            if responses.count >= limit {
                tooMany = true
                parser.abortParsing()
                return
            }
            current = DAVResponse()
        case "propstat":
            pending = DAVResponse()
            propstatStatus = nil
        case "prop": inProp = true
        case "collection" where inProp: pending.isCollection = true
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        // A value longer than any real one is cut; the checks refuse it later.
        if text.utf8.count < 8192 { text += string }
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        // Made only for the elements kept (a listing ends several elements per entry).
        var value: String { String(HTTPText.trimmed(text)) }
        defer { text = "" }
        if namespaceURI == Self.owncloud, elementName == "fileid", inProp {
            pending.fileID = value
            return
        }
        guard namespaceURI == Self.dav else { return }
        switch elementName {
        case "href" where !inProp: current?.href = value
        case "status" where !inProp: propstatStatus = value
        case "prop": inProp = false
        case "getcontentlength" where inProp: pending.contentLength = value
        case "getlastmodified" where inProp: pending.lastModified = value
        case "creationdate" where inProp: pending.creationDate = value
        case "getetag" where inProp: pending.etag = value
        case "getcontenttype" where inProp: pending.contentType = value
        case "quota-available-bytes" where inProp: pending.quotaAvailable = value
        case "propstat":
            // Only a propstat whose status is 200 holds values.
            if let status = propstatStatus, status.split(separator: " ").dropFirst().first == "200", var response = current {
                response.isCollection = response.isCollection || pending.isCollection
                response.contentLength = pending.contentLength ?? response.contentLength
                response.lastModified = pending.lastModified ?? response.lastModified
                response.creationDate = pending.creationDate ?? response.creationDate
                response.etag = pending.etag ?? response.etag
                response.contentType = pending.contentType ?? response.contentType
                response.quotaAvailable = pending.quotaAvailable ?? response.quotaAvailable
                response.fileID = pending.fileID ?? response.fileID
                current = response
            }
        case "response":
            if let current { responses.append(current) }
            current = nil
        case "multistatus": complete = true
        default: break
        }
    }
}

struct MultistatusError: Error {
    var message: String
}

/// The sizes of the reads a parse made from its stream, so tests can see a body is read in
/// chunks, never whole.
final class ReadCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var _largest = 0
    private var _total: Int64 = 0

    /// The most bytes one read returned.
    var largest: Int { lock.withLock { _largest } }
    /// The bytes read in all.
    var total: Int64 { lock.withLock { _total } }

    func record(_ count: Int) {
        guard count > 0 else { return }
        lock.withLock {
            _largest = max(_largest, count)
            _total += Int64(count)
        }
    }
}

/// An input stream that passes reads on to another and counts them.
final class CountingInputStream: InputStream {
    private let base: InputStream
    private let counter: ReadCounter

    init(_ base: InputStream, counter: ReadCounter) {
        self.base = base
        self.counter = counter
        super.init(data: Data())
    }

    override func open() { base.open() }
    override func close() { base.close() }
    override var hasBytesAvailable: Bool { base.hasBytesAvailable }
    override var streamStatus: Stream.Status { base.streamStatus }
    override var streamError: Error? { base.streamError }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength length: Int) -> Int {
        let count = base.read(buffer, maxLength: length)
        counter.record(count)
        return count
    }
}
