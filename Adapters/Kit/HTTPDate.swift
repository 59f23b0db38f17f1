import Foundation

/// The two date forms HTTP stores send, parsed by hand: RFC 1123 (HTTP's `Date` and
/// `Last-Modified`, WebDAV's `getlastmodified`: `Sun, 06 Nov 1994 08:49:37 GMT`) and RFC 3339
/// (WebDAV's `creationdate`, S3's `LastModified`: `1994-11-06T08:49:37Z`, with a fraction or
/// an offset). Making a `DateFormatter` per entry was 70% of the CPU of a WebDAV listing, and
/// one per reply 13% of an S3 download of small files. Every field is range-checked; anything
/// else returns `nil` (the caller falls back to a formatter for forms seldom seen).
public enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` (GMT or UTC), or `nil`.
    public static func rfc1123(_ text: Substring) -> Date? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT" || parts[5] == "UTC",
            let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3]),
            let seconds = clock(parts[4])
        else { return nil }
        return date(year: year, month: month + 1, day: day, seconds: Double(seconds))
    }

    /// `1994-11-06T08:49:37Z`, with an optional fraction of a second and `Z` or `±hh:mm`, or `nil`.
    public static func rfc3339(_ text: Substring) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            let year = number(bytes[0..<4]), let month = number(bytes[5..<7]), let day = number(bytes[8..<10]),
            let time = clock(Substring(decoding: bytes[11..<19], as: UTF8.self))
        else { return nil }
        var index = 19
        var fraction = 0.0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, let digit = digit(bytes[index]) {
                if index - start < 9 { fraction += Double(digit) * scale }
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offset = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == bytes.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == bytes.count, bytes[index + 3] == UInt8(ascii: ":"),
                let hours = number(bytes[(index + 1)..<(index + 3)]), let minutes = number(bytes[(index + 4)..<(index + 6)]),
                hours < 24, minutes < 60
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }
        return date(year: year, month: month, day: day, seconds: Double(time - offset) + fraction)
    }

    /// `hh:mm:ss` as seconds into the day, or `nil`.
    private static func clock(_ text: Substring) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count == 8, bytes[2] == UInt8(ascii: ":"), bytes[5] == UInt8(ascii: ":"),
            let hours = number(bytes[0..<2]), let minutes = number(bytes[3..<5]), let seconds = number(bytes[6..<8]),
            hours < 24, minutes < 60, seconds <= 60
        else { return nil }
        return (hours * 60 + minutes) * 60 + seconds
    }

    private static func digit(_ byte: UInt8) -> Int? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? Int(byte - UInt8(ascii: "0")) : nil
    }

    /// Decimal digits only (no sign), or `nil`.
    private static func number(_ bytes: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for byte in bytes {
            guard let digit = digit(byte) else { return nil }
            value = value * 10 + digit
        }
        return bytes.isEmpty ? nil : value
    }

    /// The date of a civil day and seconds into it (UTC), or `nil` for a day that does not
    /// exist or a year outside 1..9999.
    private static func date(year: Int, month: Int, day: Int, seconds: Double) -> Date? {
        guard (1...9999).contains(year), (1...12).contains(month), day >= 1 else { return nil }
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard day <= lengths[month - 1] else { return nil }
        // Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: Double(days) * 86_400 + seconds)
    }
}
