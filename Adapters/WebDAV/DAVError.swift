import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The body of a WebDAV error reply (RFC 4918 §16 `DAV:error`), as Sabre/DAV servers
/// (ownCloud, Nextcloud) and ownCloud Infinite Scale write it:
///
/// ```xml
/// <d:error xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns">
///   <s:exception>Sabre\DAV\Exception\BadRequest</s:exception>
///   <s:message>The computed checksum does not match the one received from the client.</s:message>
/// </d:error>
/// ```
///
/// Parsed with namespaces, so prefixes do not matter; ownCloud Infinite Scale declares the DAV
/// namespace as `DAV` (no colon), which is taken as `DAV:`. Only the root element, the first
/// `s:exception`, `s:message` and `s:header` directly inside it, and the names of the DAV
/// precondition elements (`<d:lock-token-submitted/>`, …) are kept; anything else is ignored.
struct DAVError: Sendable, Equatable {
    /// The Sabre exception class, such as `Sabre\DAV\Exception\BadRequest`.
    var exception: String?
    /// The server's message for people.
    var message: String?
    /// The request header the error is about (`s:header`), where the server names one.
    var header: String?
    /// The RFC 4918 precondition and postcondition codes: the local names of the DAV elements
    /// inside `DAV:error`.
    var conditions: [String] = []

    /// The message ownCloud 10 (`apps/dav`, `File::put` and the chunked upload's `MOVE`) and
    /// ownCloud Infinite Scale (reva's `ocdav` `PUT` and TUS handlers) send, with status 400 and
    /// the exception `Sabre\DAV\Exception\BadRequest`, when the bytes they received do not
    /// have the `OC-Checksum` the client sent. Nextcloud stores the header without checking it.
    static let checksumMismatchMessage = "The computed checksum does not match the one received from the client."
    /// Sabre's exception class for a `400 Bad Request`.
    static let badRequest = #"Sabre\DAV\Exception\BadRequest"#

    /// The error of a reply body, or `nil` when the body is not a `DAV:error` document (empty,
    /// HTML, plain text, not well-formed, cut short, or over 64 KiB).
    init?(body: Data) {
        guard !body.isEmpty, body.count <= 64 * 1024 else { return nil }
        let reader = DAVErrorReader()
        let parser = XMLParser(data: body)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        guard parser.parse(), reader.isError, reader.isComplete else { return nil }
        self = reader.error
    }

    init(exception: String? = nil, message: String? = nil, header: String? = nil, conditions: [String] = []) {
        self.exception = exception
        self.message = message
        self.header = header
        self.conditions = conditions
    }

    /// Whether a reply to a `PUT` (or to the `MOVE` that assembles a chunked upload) that
    /// carried `OC-Checksum` says the server received other bytes than were sent: status 400
    /// and a `DAV:error` body whose exception is ``badRequest`` and whose message is
    /// ``checksumMismatchMessage``. Recognised from these parts, never from a word found in
    /// the body: a `400` for any other reason (Nextcloud's size mismatch, a plain-text or HTML
    /// page that mentions checksums) is not a checksum refusal.
    static func isChecksumRefusal(status: Int, body: Data) -> Bool {
        guard status == 400, let error = DAVError(body: body) else { return false }
        return error.exception == badRequest
            && error.message?.trimmingCharacters(in: .whitespacesAndNewlines) == checksumMismatchMessage
    }
}

/// The SAX delegate behind ``DAVError/init(body:)``.
private final class DAVErrorReader: NSObject, XMLParserDelegate {
    private static let dav: Set<String> = ["DAV:", "DAV"]
    private static let sabre = "http://sabredav.org/ns"

    private(set) var error = DAVError()
    /// The root element is `DAV:error`.
    private(set) var isError = false
    /// The root element was closed: the body is not cut short.
    private(set) var isComplete = false
    private var depth = 0
    private var text = ""

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        depth += 1
        text = ""
        if depth == 1 {
            isError = elementName == "error" && Self.dav.contains(namespaceURI ?? "")
            if !isError { parser.abortParsing() }
        } else if depth == 2, Self.dav.contains(namespaceURI ?? ""), error.conditions.count < 16 {
            error.conditions.append(String(elementName.prefix(100)))
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if text.utf8.count < 4096 { text += string }
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        defer {
            depth -= 1
            text = ""
        }
        if depth == 1 { isComplete = true }
        guard depth == 2, namespaceURI == Self.sabre else { return }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        switch elementName {
        case "exception" where error.exception == nil: error.exception = value
        case "message" where error.message == nil: error.message = value
        case "header" where error.header == nil: error.header = value
        default: break
        }
    }
}
