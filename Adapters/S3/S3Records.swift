import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// A reply of S3's multipart API as it comes over the wire (`InitiateMultipartUploadResult`,
/// `CompleteMultipartUploadResult`, `ListMultipartUploadsResult`, `ListPartsResult`): the
/// text of the root element's children, and the children of each repeated record element
/// (`Upload`, `Part`). Values are kept as the server sent them; S3Backend+Multipart.swift
/// checks them where it uses them.
struct S3Records: Sendable {
    /// The root element's name (`Error` for an error reply).
    var root = ""
    /// The text of each child of the root that is not a record.
    var fields: [String: String] = [:]
    /// The children of each record element, in order.
    var records: [[String: String]] = []
    /// The root element was closed: the reply is complete.
    var complete = false

    /// The reply in a body, with `record` as the repeated element; `nil` when the body is not
    /// well-formed and complete XML or holds more than `limit` records.
    static func parse(_ data: Data, record: String = "", limit: Int = 10_000) -> S3Records? {
        let delegate = S3RecordsReader(record: record, limit: limit)
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        parser.shouldProcessNamespaces = false
        guard parser.parse(), !delegate.tooMany, delegate.records.complete else { return nil }
        return delegate.records
    }
}

/// The XMLParser delegate of ``S3Records``; element names without their namespace prefix.
private final class S3RecordsReader: NSObject, XMLParserDelegate {
    let record: String
    let limit: Int
    var records = S3Records()
    var tooMany = false
    private var path: [String] = []
    private var current: [String: String]?
    private var text = ""

    init(record: String, limit: Int) {
        self.record = record
        self.limit = limit
    }

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
        if path.count == 1 { records.root = name }
        if path.count == 2 && name == record { current = [:] }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        let name = Self.local(elementName)
        defer {
            path.removeLast()
            text = ""
        }
        switch path.count {
        case 1: records.complete = true
        case 2 where name == record:
            if let current {
                if records.records.count >= limit {
                    tooMany = true
                    parser.abortParsing()
                    return
                }
                records.records.append(current)
            }
            current = nil
        case 2: records.fields[name] = text
        case 3 where path[1] == record: current?[name] = text
        default: break
        }
    }
}
