import AdapterKit
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The XML of WebDAV (RFC 4918) as it comes over the wire: the PROPFIND request body and the
// `207 Multi-Status` reply, parsed with libxml2's streaming (SAX2) callbacks. Values are kept
// as the server sent them; WebDAVBackend+Items.swift checks them where they become items.

/// The PROPFIND body: the properties the adapter reads, nothing more (`allprop` would make
/// servers compute expensive ones). `oc:fileid` only for a server that has it (`fileIDs`) and
/// `quota-available-bytes` only where the root is listed (`quota`): Apache looks a property it
/// does not have up in each entry's database of dead properties, which took as much of its CPU
/// as the whole listing (`tree100k`'s 1,085 listings: 1.42 CPU-s of Apache's with both, 0.66
/// without).
func propfindBody(fileIDs: Bool, quota: Bool) -> Data {
    let extra = (quota ? "<d:quota-available-bytes/>" : "") + (fileIDs ? "<oc:fileid/>" : "")
    return Data(
        """
        <?xml version="1.0" encoding="utf-8"?>
        <d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">
          <d:prop>
            <d:resourcetype/><d:getcontentlength/><d:getlastmodified/><d:creationdate/><d:getetag/>
            <d:getcontenttype/>\(extra)
          </d:prop>
        </d:propfind>
        """.utf8)
}

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

/// Parses a multistatus body into its responses, from libxml2's SAX2 callbacks
/// (``MultistatusReader``): element names and namespaces are compared as bytes, and only the
/// values kept become strings.
final class MultistatusParser {
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
    /// The status of the propstat being read is 200.
    private var propstatIsOK = false
    /// The text of the element being read (a value longer than any real one is cut; the checks
    /// refuse it later).
    private var text: [UInt8] = []
    private static let textLimit = 8192
    private var inProp = false

    init(limit: Int) { self.limit = limit }

    /// The responses of a multistatus body in memory.
    ///
    /// - Throws: `MultistatusError` when the body is not well-formed XML or holds more than
    ///   `limit` responses.
    static func parse(_ data: Data, limit: Int) throws -> [DAVResponse] {
        let parser = MultistatusParser(limit: limit)
        var offset = 0
        // A buffer the size of the body: it goes in one chunk.
        try MultistatusReader.read(into: parser, bufferSize: data.count) { buffer in
            let count = min(buffer.count, data.count - offset)
            if count > 0 { data.copyBytes(to: buffer.bindMemory(to: UInt8.self), from: offset..<offset + count) }
            offset += count
            return count
        }
        return try parser.result()
    }

    /// The responses of a multistatus body in a file, read in chunks of 128 KiB into libxml2's
    /// push parser, so the body is never in memory whole.
    ///
    /// - Throws: `MultistatusError` when the file cannot be read, the body is not well-formed
    ///   XML or holds more than `limit` responses.
    static func parse(file path: String, limit: Int, reads: ReadCounter? = nil) throws -> [DAVResponse] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw MultistatusError(message: "the reply could not be read back") }
        defer { close(descriptor) }
        let parser = MultistatusParser(limit: limit)
        try MultistatusReader.read(into: parser) { buffer in
            while true {
                let count = read(descriptor, buffer.baseAddress, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { throw MultistatusError(message: "the reply could not be read back") }
                reads?.record(count)
                return count
            }
        }
        return try parser.result()
    }

    /// The responses once the body was read whole.
    /// - Throws: `MultistatusError` when they were too many or the body ended early.
    private func result() throws -> [DAVResponse] {
        if tooMany { throw MultistatusError(message: "more than \(limit) entries") }
        guard complete else {
            throw MultistatusError(message: "the reply is not a complete multistatus body (no </multistatus>)")
        }
        return responses
    }

    /// Whether the parser has seen enough (too many responses): the reader stops.
    var isDone: Bool { tooMany }

    /// An element starts: its local name and namespace, NUL-terminated bytes.
    func start(_ name: UnsafePointer<UInt8>, namespace: UnsafePointer<UInt8>?) {
        text.removeAll(keepingCapacity: true)
        guard Self.equal(namespace, "DAV:") else { return }
        if Self.equal(name, "response") {
            if responses.count >= limit {
                tooMany = true
                return
            }
            current = DAVResponse()
        } else if Self.equal(name, "propstat") {
            pending = DAVResponse()
            propstatIsOK = false
        } else if Self.equal(name, "prop") {
            inProp = true
        } else if inProp, Self.equal(name, "collection") {
            pending.isCollection = true
        }
    }

    /// Text of the element being read (in pieces).
    func characters(_ bytes: UnsafeBufferPointer<UInt8>) {
        let room = Self.textLimit - text.count
        if room > 0 { text.append(contentsOf: UnsafeBufferPointer(rebasing: bytes.prefix(room))) }
    }

    /// An element ends: its local name and namespace, NUL-terminated bytes.
    func end(_ name: UnsafePointer<UInt8>, namespace: UnsafePointer<UInt8>?) {
        defer { text.removeAll(keepingCapacity: true) }
        // Made only for the elements kept (a listing ends several elements per entry), trimmed
        // as bytes: one string per value. libxml2 hands UTF-8 (it checked or converted the
        // body's encoding).
        var value: String { Self.trimmedString(text) }
        if Self.equal(namespace, "http://owncloud.org/ns") {
            if inProp, Self.equal(name, "fileid") { pending.fileID = value }
            return
        }
        guard Self.equal(namespace, "DAV:") else { return }
        switch Self.davElement(name) {
        case .href where !inProp: current?.href = value
        case .status where !inProp: propstatIsOK = Self.isOK(status: text)
        case .prop: inProp = false
        case .getcontentlength where inProp: pending.contentLength = value
        case .getlastmodified where inProp: pending.lastModified = value
        case .creationdate where inProp: pending.creationDate = value
        case .getetag where inProp: pending.etag = value
        case .getcontenttype where inProp: pending.contentType = value
        case .quotaAvailableBytes where inProp: pending.quotaAvailable = value
        case .propstat:
            // Only a propstat whose status is 200 holds values; merged into the response in
            // place (a copy of the response and back was a copy of each of its strings).
            guard propstatIsOK, current != nil else { break }
            if pending.isCollection { current!.isCollection = true }
            if let value = pending.contentLength { current!.contentLength = value }
            if let value = pending.lastModified { current!.lastModified = value }
            if let value = pending.creationDate { current!.creationDate = value }
            if let value = pending.etag { current!.etag = value }
            if let value = pending.contentType { current!.contentType = value }
            if let value = pending.quotaAvailable { current!.quotaAvailable = value }
            if let value = pending.fileID { current!.fileID = value }
        case .response:
            if let current { responses.append(current) }
            current = nil
        case .multistatus: complete = true
        default: break
        }
    }

    /// The bytes without XML's whitespace around them (``AdapterKit/HTTPText/trimmed(_:)-(Substring)``), as a string.
    private static func trimmedString(_ bytes: [UInt8]) -> String {
        String(decoding: HTTPText.trimmed(bytes[...]), as: UTF8.self)
    }

    /// Whether a propstat's `status` (`HTTP/1.1 200 OK`) says 200: its second word, words
    /// split at spaces, once trimmed.
    static func isOK(status bytes: [UInt8]) -> Bool {
        let text = HTTPText.trimmed(bytes[...])
        guard let firstSpace = text.firstIndex(of: UInt8(ascii: " ")) else { return false }
        let second = text[firstSpace...].drop { $0 == UInt8(ascii: " ") }.prefix { $0 != UInt8(ascii: " ") }
        return second.elementsEqual("200".utf8)
    }

    /// The `DAV:` elements whose end matters.
    private enum DAVElement: CaseIterable {
        case href, status, prop, getcontentlength, getlastmodified, creationdate, getetag, getcontenttype
        case quotaAvailableBytes, propstat, response, multistatus

        var name: StaticString {
            switch self {
            case .href: "href"
            case .status: "status"
            case .prop: "prop"
            case .getcontentlength: "getcontentlength"
            case .getlastmodified: "getlastmodified"
            case .creationdate: "creationdate"
            case .getetag: "getetag"
            case .getcontenttype: "getcontenttype"
            case .quotaAvailableBytes: "quota-available-bytes"
            case .propstat: "propstat"
            case .response: "response"
            case .multistatus: "multistatus"
            }
        }
    }

    private static func davElement(_ name: UnsafePointer<UInt8>) -> DAVElement? {
        DAVElement.allCases.first { equal(name, $0.name) }
    }

    /// Whether the NUL-terminated bytes `bytes` are `expected`.
    private static func equal(_ bytes: UnsafePointer<UInt8>?, _ expected: StaticString) -> Bool {
        guard let bytes else { return false }
        let count = expected.utf8CodeUnitCount
        let wanted = expected.utf8Start
        for index in 0..<count where bytes[index] != wanted[index] { return false }
        return bytes[count] == 0
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
