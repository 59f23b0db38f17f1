import Foundation
import Testing

@testable import AdapterKit

/// The hand-made date parsers give what the formatters give, and nothing for anything else.
@Suite struct HTTPDateTests {
    static func formatter1123(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }

    @Test(arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Tue, 29 Feb 2000 23:59:59 GMT",
        "Wed, 26 Nov 2026 14:05:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Mar 2100 12:00:00 GMT",
    ])
    func rfc1123MatchesTheFormatter(_ text: String) throws {
        let parsed = try #require(HTTPDate.rfc1123(text[...]))
        #expect(parsed == Self.formatter1123(text))
        // Part of a longer text (read in place), and with more spaces between the fields.
        #expect(HTTPDate.rfc1123(("  " + text + " ").dropFirst(2).dropLast()) == parsed)
        #expect(HTTPDate.rfc1123(text.replacingOccurrences(of: " ", with: "   ")[...]) == parsed)
    }

    @Test(arguments: [
        ("1994-11-06T08:49:37Z", 784_111_777.0), ("1970-01-01T00:00:00Z", 0), ("2000-02-29T23:59:59.5Z", 951_868_799.5),
        ("1994-11-06T10:49:37+02:00", 784_111_777), ("1994-11-06T03:49:37-05:00", 784_111_777),
        ("2026-11-26T14:05:00.123456789Z", 1_795_701_900.123456789),
    ])
    func rfc3339GivesTheInstant(_ text: String, _ seconds: Double) throws {
        let parsed = try #require(HTTPDate.rfc3339(text[...]))
        #expect(HTTPDate.rfc3339(("x" + text).dropFirst()) == parsed)
        #expect(abs(parsed.timeIntervalSince1970 - seconds) < 1e-6)
        if !text.contains(".") { #expect(parsed == ISO8601DateFormatter().date(from: text)) }
    }

    /// What a hostile server may send: impossible days and times, signs, junk, overflowing
    /// digits. Never a trap; no date.
    @Test(arguments: [
        "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, -6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 99999999999999999999 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
        "", "GMT", "Sun 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT extra", "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, + Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 CET", "Sun, 06 Nov 1994 08:49:3x GMT",
    ])
    func badRFC1123IsNil(_ text: String) {
        #expect(HTTPDate.rfc1123(text[...]) == nil)
    }

    @Test(arguments: [
        "1994-13-06T08:49:37Z", "1994-11-31T08:49:37Z", "1994-11-06T08:60:37Z", "1994-11-06 08:49:37Z",
        "1994-11-06T08:49:37", "1994-11-06T08:49:37+2:00", "1994-11-06T08:49:37.Z", "0000-01-01T00:00:00Z",
        "99999-11-06T08:49:37Z", "1994-11-06T08:49:37Zjunk", "",
    ])
    func badRFC3339IsNil(_ text: String) {
        #expect(HTTPDate.rfc3339(text[...]) == nil)
    }
}
