import Foundation
import Testing

@testable import WebDAVAdapter

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The multistatus parser over libxml2's SAX2 callbacks: any namespace prefix (or none), text in
/// pieces (entities, CDATA, a chunk boundary), only a 200 propstat's values, and bodies that
/// are not well-formed, not complete, too long, or carry entities of their own refused.
@Suite struct MultistatusParserTests {
    static let limit = 10

    /// A body as servers write it: Apache's `D:` and `lp1:` prefixes, a 404 propstat.
    static let apache = Data(
        """
        <?xml version="1.0" encoding="utf-8"?>
        <D:multistatus xmlns:D="DAV:" xmlns:ns0="DAV:">
        <D:response xmlns:lp1="DAV:" xmlns:lp2="http://apache.org/dav/props/">
        <D:href>/dav/a%20b/</D:href>
        <D:propstat><D:prop><lp1:resourcetype><D:collection/></lp1:resourcetype>
        <lp1:getlastmodified>Sun, 06 Nov 1994 08:49:37 GMT</lp1:getlastmodified>
        <lp1:getetag>"2a-5f"</lp1:getetag></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>
        <D:propstat><D:prop><D:quota-available-bytes/><D:getcontenttype/></D:prop>
        <D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>
        </D:response>
        <D:response><D:href>/dav/a%20b/f.txt</D:href><D:propstat><D:prop>
        <D:getcontentlength>42</D:getcontentlength><D:getcontenttype>text/plain</D:getcontenttype>
        </D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>
        </D:multistatus>
        """.utf8)

    @Test func valuesOfA200PropstatUnderAnyPrefix() throws {
        let responses = try MultistatusParser.parse(Self.apache, limit: Self.limit)
        #expect(responses.count == 2)
        #expect(responses[0].href == "/dav/a%20b/")
        #expect(responses[0].isCollection)
        #expect(responses[0].lastModified == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(responses[0].etag == "\"2a-5f\"")
        #expect(responses[0].contentType == nil, "a 404 propstat's values are not taken")
        #expect(responses[1].href == "/dav/a%20b/f.txt")
        #expect(!responses[1].isCollection)
        #expect(responses[1].contentLength == "42")
        #expect(responses[1].contentType == "text/plain")
    }

    /// The default namespace, an entity and character references, CDATA, and ownCloud's file id.
    @Test func textInPiecesAndTheDefaultNamespace() throws {
        let body = Data(
            """
            <multistatus xmlns="DAV:" xmlns:oc="http://owncloud.org/ns"><response>
            <href>/dav/R&amp;D/<![CDATA[x<y]]>&#x41;</href>
            <propstat><prop><getetag>  W/"abc"  </getetag><oc:fileid>00000042oc</oc:fileid></prop>
            <status>HTTP/1.1 200 OK</status></propstat></response></multistatus>
            """.utf8)
        let responses = try MultistatusParser.parse(body, limit: Self.limit)
        #expect(responses.count == 1)
        #expect(responses.first?.href == "/dav/R&D/x<yA")
        #expect(responses.first?.etag == "W/\"abc\"")
        #expect(responses.first?.fileID == "00000042oc")
    }

    /// Elements of other namespaces with DAV's names are not DAV's.
    @Test func otherNamespacesAreNotDAV() throws {
        let body = Data(
            """
            <d:multistatus xmlns:d="DAV:" xmlns:x="urn:other"><d:response><d:href>/a</d:href>
            <d:propstat><d:prop><x:getcontentlength>7</x:getcontentlength><x:collection/></d:prop>
            <d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>
            """.utf8)
        let responses = try MultistatusParser.parse(body, limit: Self.limit)
        #expect(responses.count == 1)
        #expect(responses.first?.contentLength == nil)
        #expect(responses.first?.isCollection == false)
    }

    @Test(arguments: [
        ("<d:multistatus xmlns:d=\"DAV:\"><d:response></d:multistatus>", "not well-formed"),
        // Cut short: libxml2 finds the end early (a parser that did not would find no end tag).
        ("<d:multistatus xmlns:d=\"DAV:\"><d:response><d:href>/a</d:href></d:response>", "not well-formed"),
        ("not xml at all", "not well-formed"),
        ("", "not well-formed"),
        (
            "<?xml version=\"1.0\"?><!DOCTYPE m [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]>"
                + "<d:multistatus xmlns:d=\"DAV:\"><d:response><d:href>&b;</d:href></d:response></d:multistatus>",
            "not well-formed"
        ),
    ])
    func bodiesThatAreNotCompleteMultistatusAreRefused(_ text: String, _ reason: String) {
        do {
            let responses = try MultistatusParser.parse(Data(text.utf8), limit: Self.limit)
            Issue.record("parsed \(responses.count) responses from \(text)")
        } catch let error as MultistatusError {
            #expect(error.message.contains(reason), "\(error.message)")
        } catch {
            Issue.record("\(error)")
        }
    }

    /// A propstat's values count only when its status's second word is `200`, whatever the
    /// blanks around the status (words split at spaces).
    @Test(arguments: [
        ("HTTP/1.1 200 OK", true), ("\n  HTTP/1.1 200 OK\n", true), ("HTTP/1.1  200", true), ("HTTP/1.1 200\r\n", true),
        ("HTTP/1.1 404 Not Found", false), ("HTTP/1.1 2000 OK", false), ("HTTP/1.1\t200 OK", false), ("200", false),
        ("HTTP/1.1 200\n OK", false), ("", false),
    ])
    func aPropstatCountsOnlyWithStatus200(_ status: String, _ counts: Bool) throws {
        let body = """
            <d:multistatus xmlns:d="DAV:"><d:response><d:href>/f</d:href><d:propstat><d:prop>
            <d:getcontentlength>7</d:getcontentlength></d:prop><d:status>\(status)</d:status></d:propstat>
            </d:response></d:multistatus>
            """
        #expect(MultistatusParser.isOK(status: Array(status.utf8)) == counts)
        let responses = try MultistatusParser.parse(Data(body.utf8), limit: Self.limit)
        #expect(responses.count == 1)
        #expect(responses.first?.contentLength == (counts ? "7" : nil))
    }

    /// The PROPFIND body asks for `oc:fileid` only where the server has it and for the quota
    /// only of the root: Apache looks each property it lacks up in every entry's dead-property
    /// database (twice the CPU per listing).
    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func theBodyAsksForFileIDsAndQuotaOnlyWhereNeeded(_ fileIDs: Bool, _ quota: Bool) throws {
        let body = String(decoding: propfindBody(fileIDs: fileIDs, quota: quota), as: UTF8.self)
        for property in ["resourcetype", "getcontentlength", "getlastmodified", "creationdate", "getetag", "getcontenttype"] {
            #expect(body.contains("<d:\(property)/>"))
        }
        #expect(body.contains("<oc:fileid/>") == fileIDs)
        #expect(body.contains("<d:quota-available-bytes/>") == quota)
        let document = try XMLDocument(data: Data(body.utf8))
        #expect(document.rootElement()?.localName == "propfind")
    }

    @Test func moreResponsesThanTheLimitAreRefused() {
        let entries = (0...Self.limit).map { "<d:response><d:href>/f\($0)</d:href></d:response>" }.joined()
        let body = Data("<d:multistatus xmlns:d=\"DAV:\">\(entries)</d:multistatus>".utf8)
        #expect(throws: MultistatusError.self) { try MultistatusParser.parse(body, limit: Self.limit) }
        let fewer = Data("<d:multistatus xmlns:d=\"DAV:\">\(entries.dropLast(0))</d:multistatus>".utf8)
        #expect((try? MultistatusParser.parse(fewer, limit: Self.limit + 1))?.count == Self.limit + 1)
    }

    /// A body of many chunks read from a file gives what the same body in memory gives, with
    /// names and entities across the chunks' boundaries.
    @Test func aFileInChunksGivesWhatMemoryGives() throws {
        let entries = (0..<3000).map {
            "<d:response><d:href>/dav/caf%C3%A9 &amp; file-\($0).txt</d:href><d:propstat><d:prop>"
                + "<d:getcontentlength>\($0)</d:getcontentlength></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        }.joined(separator: "\n")
        let body = Data("<d:multistatus xmlns:d=\"DAV:\">\(entries)</d:multistatus>".utf8)
        #expect(body.count > 2 * MultistatusReader.chunkSize)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("multistatus-\(UUID().uuidString).xml")
        try body.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let reads = ReadCounter()
        let fromFile = try MultistatusParser.parse(file: file.path, limit: 5000, reads: reads)
        let fromMemory = try MultistatusParser.parse(body, limit: 5000)
        #expect(fromFile.count == 3000)
        #expect(fromFile.map(\.href) == fromMemory.map(\.href))
        #expect(fromFile.map(\.contentLength) == fromMemory.map(\.contentLength))
        #expect(fromFile[2999].href == "/dav/caf%C3%A9 & file-2999.txt")
        #expect(reads.total == Int64(body.count))
        #expect(reads.largest <= MultistatusReader.chunkSize)
    }
}
