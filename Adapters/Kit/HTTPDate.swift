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
        var text = text
        return text.withUTF8 { rfc1123(bytes: $0) }
    }

    /// ``rfc1123(_:)`` of the text's bytes: six fields between spaces, read in place (a
    /// `split` into substrings and a string per month name were a tenth of a WebDAV listing's
    /// CPU on the cooperative threads).
    private static func rfc1123(bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var field = 0
        var (day, month, year, seconds) = (0, 0, 0, 0)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: " ") {
                index += 1
                continue
            }
            var end = index
            while end < bytes.count, bytes[end] != UInt8(ascii: " ") { end += 1 }
            let token = UnsafeBufferPointer(rebasing: bytes[index..<end])
            switch field {
            case 0: guard token.last == UInt8(ascii: ",") else { return nil }
            case 1:
                guard let value = signedNumber(token) else { return nil }
                day = value
            case 2:
                guard let value = monthNumber(token) else { return nil }
                month = value + 1
            case 3:
                guard let value = signedNumber(token) else { return nil }
                year = value
            case 4:
                guard let value = clock(token) else { return nil }
                seconds = value
            case 5: guard token.elementsEqual("GMT".utf8) || token.elementsEqual("UTC".utf8) else { return nil }
            default: return nil
            }
            field += 1
            index = end
        }
        guard field == 6 else { return nil }
        return date(year: year, month: month, day: day, seconds: Double(seconds))
    }

    /// `1994-11-06T08:49:37Z`, with an optional fraction of a second and `Z` or `±hh:mm`, or `nil`.
    public static func rfc3339(_ text: Substring) -> Date? {
        var text = text
        return text.withUTF8 { rfc3339(bytes: $0) }
    }

    private static func rfc3339(bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            let year = number(bytes[0..<4]), let month = number(bytes[5..<7]), let day = number(bytes[8..<10]),
            let time = clock(UnsafeBufferPointer(rebasing: bytes[11..<19]))
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
    private static func clock(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard bytes.count == 8, bytes[2] == UInt8(ascii: ":"), bytes[5] == UInt8(ascii: ":"),
            let hours = number(bytes[0..<2]), let minutes = number(bytes[3..<5]), let seconds = number(bytes[6..<8]),
            hours < 24, minutes < 60, seconds <= 60
        else { return nil }
        return (hours * 60 + minutes) * 60 + seconds
    }

    /// The month an English three-letter name (`Jan` … `Dec`, as written) names, 0-based, or `nil`.
    private static func monthNumber(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard bytes.count == 3 else { return nil }
        return months.firstIndex { $0.utf8.elementsEqual(bytes) }
    }

    /// An optional `+` or `-` and decimal digits, as `Int(_:)` reads them, or `nil`.
    private static func signedNumber(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let first = bytes.first else { return nil }
        let negative = first == UInt8(ascii: "-")
        let digits = negative || first == UInt8(ascii: "+") ? bytes[1...] : bytes[0...]
        // More digits than any day or year has: not a date (and no overflow).
        guard digits.count <= 18, let value = number(digits) else { return nil }
        return negative ? -value : value
    }

    private static func digit(_ byte: UInt8) -> Int? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? Int(byte - UInt8(ascii: "0")) : nil
    }

    /// Decimal digits only (no sign), or `nil`.
    private static func number(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Int? {
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
