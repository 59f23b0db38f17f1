import Foundation
import ProviderCore
import Testing

/// What request log lines mask: credentials in URLs, secret-looking query fields, headers and
/// JSON keys; nothing else.
@Suite struct LogRedactionTests {
    @Test func aURLKeepsItsPathButNotItsCredentialsOrTokens() {
        #expect(LogRedaction.url("https://alice:pw%20x@dav.example:8443/files/a.txt") == "https://***@dav.example:8443/files/a.txt")
        #expect(LogRedaction.url("https://alice@dav.example/a@b.txt") == "https://***@dav.example/a@b.txt")
        #expect(
            LogRedaction.url("http://127.0.0.1:8080/media?path=%2Fa&access_token=abc&X-Amz-Signature=f00&page=2#top")
                == "http://127.0.0.1:8080/media?path=%2Fa&access_token=***&X-Amz-Signature=***&page=2#top")
        #expect(LogRedaction.url("http://127.0.0.1:8080/dav/a@b?c") == "http://127.0.0.1:8080/dav/a@b?c")
        #expect(LogRedaction.url("not a url") == "not a url")
    }

    @Test func secretHeadersKeepTheirNameAndScheme() {
        #expect(LogRedaction.header("Authorization: Bearer abc.def") == "Authorization: Bearer ***")
        #expect(LogRedaction.header("authorization: Basic YWxpY2U6cHc=") == "authorization: Basic ***")
        #expect(LogRedaction.header("X-Api-Key: 123") == "X-Api-Key: ***")
        #expect(LogRedaction.header("Cookie: session=1") == "Cookie: ***")
        #expect(LogRedaction.header("Depth: 1") == "Depth: 1")
        #expect(LogRedaction.header("If-Match: \"v3\"") == "If-Match: \"v3\"")
    }

    @Test func secretJSONKeysAndOptionsAreMaskedAtAnyDepth() throws {
        let value: [String: Any] = ["options": ["root": "/srv", "password": "hunter2", "api-token": "t"], "path": "/a"]
        let masked = try #require(LogRedaction.json(value) as? [String: Any])
        let options = try #require(masked["options"] as? [String: Any])
        #expect(options["root"] as? String == "/srv" && masked["path"] as? String == "/a")
        #expect(options["password"] as? String == "***" && options["api-token"] as? String == "***")
        #expect(LogRedaction.options(["user": "u", "pw": "x"], secret: ["pw"]) == ["user": "u", "pw": "***"])
    }

    @Test func sizesAndTimesReadAlike() {
        #expect(RequestLogText.bytes(0) == "0 B" && RequestLogText.bytes(1023) == "1023 B")
        #expect(RequestLogText.bytes(1536) == "1.5 KiB" && RequestLogText.bytes(3 << 20) == "3.0 MiB")
        #expect(RequestLogText.duration(0.0042) == "4 ms" && RequestLogText.duration(1.25) == "1.25 s")
    }
}
