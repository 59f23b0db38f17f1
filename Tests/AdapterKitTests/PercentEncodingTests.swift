import AdapterKit
import Foundation
import Testing

/// URL paths and query values percent-encoded on the bytes: everything but RFC 3986's
/// unreserved characters (and `/` where kept) as `%XX`, upper-case hex, as Foundation encodes
/// with the unreserved set.
@Suite struct PercentEncodingTests {
    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    @Test func eachNameIsFoundationsEncodingWithTheUnreservedSet() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", "0", "-", ".", "_", "~", " ", "/", "%", "+", "?", "#", "é", "日本", "\u{1F600}", "\u{0}", "\u{7F}", ":", "@"]
        for _ in 0..<2_000 {
            let text = (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let expected = text.addingPercentEncoding(withAllowedCharacters: Self.unreserved)!
            #expect(HTTPClient.percentEncode(text, keepSlash: false) == expected)
            let kept = text.addingPercentEncoding(withAllowedCharacters: Self.unreserved.union(CharacterSet(charactersIn: "/")))!
            #expect(HTTPClient.percentEncode(text, keepSlash: true) == kept)
        }
    }

    @Test func namesAreEncodedAndJoinedWithSlashes() {
        #expect(HTTPClient.percentEncodedPath([]) == "")
        #expect(HTTPClient.percentEncodedPath(["a b", "c/d", "é"]) == "a%20b/c%2Fd/%C3%A9")
        #expect(HTTPClient.percentEncodedPath(["", "x"]) == "/x")
        let names = ["Ab 1", "日本", "100%", "~x"]
        #expect(HTTPClient.percentEncodedPath(names) == names.map { HTTPClient.percentEncode($0, keepSlash: false) }.joined(separator: "/"))
    }
}
