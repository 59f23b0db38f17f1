import Foundation
import Testing

@testable import WebDAVAdapter

/// A checksum refusal is recognised from a reply's structured parts (status, and the
/// `DAV:error` body's Sabre exception and message), over reply shapes the servers send.
@Suite struct DAVErrorTests {
    static let message = "The computed checksum does not match the one received from the client."

    /// ownCloud 10: Sabre/DAV 4 writes the `BadRequest` that `File::put` throws.
    static let ownCloud = Data(
        """
        <?xml version="1.0" encoding="utf-8"?>
        <d:error xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns">
          <s:exception>Sabre\\DAV\\Exception\\BadRequest</s:exception>
          <s:message>\(message)</s:message>
        </d:error>

        """.utf8)

    /// ownCloud Infinite Scale: reva's `ocdav` marshals it with Go's `encoding/xml`, on one
    /// line, with the DAV namespace declared as `DAV` (no colon) and an empty `s:errorcode`.
    static let infiniteScale = Data(
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <d:error xmlns:d="DAV" xmlns:s="http://sabredav.org/ns"><s:exception>Sabre\\DAV\\Exception\\BadRequest</s:exception><s:message>\(message)</s:message><s:errorcode></s:errorcode></d:error>
        """.utf8)

    @Test func ownCloudAndInfiniteScaleRefusalsAreRecognised() throws {
        for body in [Self.ownCloud, Self.infiniteScale] {
            let error = try #require(DAVError(body: body))
            #expect(error.exception == #"Sabre\DAV\Exception\BadRequest"#)
            #expect(error.message == Self.message)
            #expect(DAVError.isChecksumRefusal(status: 400, body: body))
        }
    }

    @Test func otherPrefixesAndWhitespaceMeanTheSame() {
        let body = Data(
            """
            <E:error xmlns:E="DAV:" xmlns:sabre="http://sabredav.org/ns">
              <sabre:exception>Sabre\\DAV\\Exception\\BadRequest</sabre:exception>
              <sabre:message>
                \(Self.message)
              </sabre:message>
            </E:error>
            """.utf8)
        #expect(DAVError.isChecksumRefusal(status: 400, body: body))
    }

    /// The same body with another status is not the refusal, nor is a `400` for another
    /// reason, nor a body that only mentions checksums.
    @Test func onlyThatStatusExceptionAndMessageAreARefusal() {
        #expect(!DAVError.isChecksumRefusal(status: 412, body: Self.ownCloud))
        #expect(!DAVError.isChecksumRefusal(status: 500, body: Self.ownCloud))
        // Nextcloud's size check: a BadRequest, but not about the checksum.
        let size = Data(
            """
            <?xml version="1.0" encoding="utf-8"?>
            <d:error xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns">
              <s:exception>Sabre\\DAV\\Exception\\BadRequest</s:exception>
              <s:message>Expected filesize of 10 bytes but read (from Nextcloud client) and wrote (to Nextcloud storage) 5 bytes. Could either be a network problem on the sending side or a problem writing to the storage on the server side.</s:message>
            </d:error>
            """.utf8)
        #expect(DAVError(body: size)?.exception == #"Sabre\DAV\Exception\BadRequest"#)
        #expect(!DAVError.isChecksumRefusal(status: 400, body: size))
        // The right message under another exception.
        let forbidden = Data(
            """
            <d:error xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns"><s:exception>Sabre\\DAV\\Exception\\Forbidden</s:exception><s:message>\(Self.message)</s:message></d:error>
            """.utf8)
        #expect(!DAVError.isChecksumRefusal(status: 400, body: forbidden))
        // Bodies the old check (a word found in the text) took for a refusal.
        let plain = Data("checksum mismatch".utf8)
        let html = Data("<html><head><title>400 Bad Request</title></head><body>bad OC-Checksum header</body></html>".utf8)
        let plainMessage = Data(Self.message.utf8)
        for body in [plain, html, plainMessage, Data()] {
            #expect(DAVError(body: body) == nil)
            #expect(!DAVError.isChecksumRefusal(status: 400, body: body))
        }
    }

    /// RFC 4918's own error elements are kept by name.
    @Test func davPreconditionsAreNamed() throws {
        let body = Data(
            """
            <?xml version="1.0" encoding="utf-8" ?>
            <D:error xmlns:D="DAV:"><D:lock-token-submitted><D:href>/locked/</D:href></D:lock-token-submitted></D:error>
            """.utf8)
        let error = try #require(DAVError(body: body))
        #expect(error.conditions == ["lock-token-submitted"])
        #expect(error.exception == nil && error.message == nil)
    }

    /// Hostile bodies: another root, another namespace, an external entity, an unfinished
    /// document, a body too large to be an error reply.
    @Test func hostileBodiesAreNoError() {
        let multistatus = Data(#"<d:multistatus xmlns:d="DAV:"><d:response/></d:multistatus>"#.utf8)
        let otherNamespace = Data(
            #"<x:error xmlns:x="urn:example" xmlns:s="http://sabredav.org/ns"><s:exception>Sabre\DAV\Exception\BadRequest</s:exception><s:message>\#(Self.message)</s:message></x:error>"#
                .utf8)
        let entity = Data(
            """
            <?xml version="1.0"?>
            <!DOCTYPE d:error [<!ENTITY m SYSTEM "file:///etc/hostname">]>
            <d:error xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns"><s:exception>Sabre\\DAV\\Exception\\BadRequest</s:exception><s:message>&m;</s:message></d:error>
            """.utf8)
        let unfinished = Self.ownCloud.prefix(Self.ownCloud.count - 12)
        var huge = Self.ownCloud
        huge.append(Data(repeating: 0x20, count: 70_000))
        for body in [multistatus, otherNamespace, entity, Data(unfinished), huge] {
            #expect(!DAVError.isChecksumRefusal(status: 400, body: body))
        }
        #expect(DAVError(body: multistatus) == nil)
        #expect(DAVError(body: otherNamespace) == nil)
        #expect(DAVError(body: Data(unfinished)) == nil)
        #expect(DAVError(body: huge) == nil)
        if let parsed = DAVError(body: entity) {
            // The entity is never read from the file system.
            let hostname = ((try? String(contentsOfFile: "/etc/hostname", encoding: .utf8)) ?? "")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if !hostname.isEmpty { #expect(!(parsed.message ?? "").contains(hostname)) }
        }
    }
}
