import Foundation
import Testing

@testable import AdapterKit

/// The byte-wise trim and percent-decoding give what Foundation's give, on the inputs hrefs and
/// property values bring, good and bad.
@Suite struct HTTPTextTests {
    @Test(arguments: [
        "plain", "/a/b%20c/", "caf%C3%A9", "caf%c3%a9", "%E2%82%AC100", "100%25", "a+b", "%2F%2f", "", "%",
        "%2", "%zz", "%G0", "a%", "%C3", "%FF", "%C3%28", "%ED%A0%80", "%00", "é%20é", "x%2", "/%E6%97%A5%E6%9C%AC/",
    ])
    func percentDecodingIsFoundations(_ text: String) {
        #expect(HTTPText.percentDecoded(text) == text.removingPercentEncoding, "\(text)")
        #expect(HTTPText.percentDecoded(text.dropFirst(0)) == text.removingPercentEncoding, "\(text) as a substring")
    }

    /// Random mixes of escapes (valid, cut short, not hex, not UTF-8) and plain bytes: the same
    /// string as Foundation's, or `nil` where Foundation gives `nil` or a string it repaired with
    /// U+FFFD (on Linux it gives `nil` for `%C3` but `A\u{FFFD}` for `%41%C3`): bytes that are
    /// not UTF-8 never become a name.
    @Test func percentDecodingIsFoundationsOnRandomInputs() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["%", "%4", "%41", "%C3", "%A9", "%E2%82%AC", "%ff", "%zz", "a", "/", " ", "é", "%25", "%2"]
        var decoded = 0
        for _ in 0..<2000 {
            let text = (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let foundation = text.removingPercentEncoding
            if let ours = HTTPText.percentDecoded(text) {
                decoded += 1
                #expect(ours == foundation, "\(text)")
            } else {
                #expect(foundation == nil || foundation!.unicodeScalars.contains("\u{FFFD}"), "\(text): Foundation gives \(foundation!)")
            }
        }
        #expect(decoded > 100)
    }

    @Test(arguments: [
        ("  a b  ", "a b"), ("\n\t\r x \r\n", "x"), ("", ""), ("   ", ""), ("x", "x"), ("\u{A0}x\u{A0}", "\u{A0}x\u{A0}"),
        ("\n  \"abc\"\n  ", "\"abc\""), (" é ", "é"),
    ])
    func trimmingTakesXMLWhitespaceOnly(_ text: String, _ expected: String) {
        #expect(HTTPText.trimmed(text) == expected[...])
        #expect(HTTPText.trimmed(text.dropFirst(0)) == expected[...])
    }

    @Test(arguments: [
        ("\"abc\"", "abc"), ("W/\"abc\"", "abc"), ("abc", "abc"), (" \"abc\"\t", "abc"), ("W/abc", "abc"), ("\"\"", ""),
        ("\"", "\""), ("\"\"abc\"\"", "\"abc\""), ("\"a\"b\"", "a\"b"), ("\"abc", "\"abc"), ("w/\"abc\"", "w/\"abc\""), ("", ""),
    ])
    func anETagLosesOnePairOfQuotesAndItsWeakMark(_ tag: String, _ expected: String) {
        #expect(HTTPText.unquotedETag(tag) == expected)
    }
}
