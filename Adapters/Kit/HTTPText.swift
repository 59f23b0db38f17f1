/// Text of HTTP and XML replies read byte by byte: the trim and the percent-decoding every entry
/// of a listing goes through, without Foundation's `NSString` (on Linux each
/// `trimmingCharacters(in:)` and `removingPercentEncoding` bridges the string to an `NSString`
/// and back: a fifth and a tenth of a WebDAV first sync's CPU, Docs/Performance.md, WebDAV).
public enum HTTPText {
    /// `text` without the spaces, tabs, carriage returns and line feeds around it: XML's
    /// whitespace (`S`, XML 1.0 §2.3), which HTTP's is part of. Other Unicode spaces stay: they
    /// are not whitespace to either, and a name may hold them.
    public static func trimmed(_ text: Substring) -> Substring {
        let utf8 = text.utf8
        var start = utf8.startIndex
        var end = utf8.endIndex
        while start < end, isWhitespace(utf8[start]) { start = utf8.index(after: start) }
        while end > start, isWhitespace(utf8[utf8.index(before: end)]) { end = utf8.index(before: end) }
        return text[start..<end]
    }

    /// ``trimmed(_:)-(Substring)`` of a whole string.
    public static func trimmed(_ text: String) -> Substring { trimmed(text[...]) }

    /// ``trimmed(_:)-(Substring)`` of bytes.
    package static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var (start, end) = (bytes.startIndex, bytes.endIndex)
        while start < end, isWhitespace(bytes[start]) { start += 1 }
        while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
        return bytes[start..<end]
    }

    /// An entity tag without its quotes and without a weak `W/` (`W/"abc"`, `"abc"` and `abc`
    /// are all `abc`), trimmed as ``trimmed(_:)-(Substring)`` does: one pair of quotes is
    /// removed, and only when the tag both starts and ends with one. Read on the bytes: every
    /// download's head and every object of an S3 listing comes here.
    public static func unquotedETag(_ tag: String) -> String {
        var text = trimmed(tag)
        if text.utf8.starts(with: "W/".utf8) { text = text.dropFirst(2) }
        let utf8 = text.utf8
        if utf8.count >= 2 && utf8.first == UInt8(ascii: "\"") && utf8.last == UInt8(ascii: "\"") { text = text.dropFirst().dropLast() }
        return String(text)
    }

    /// `text` with its `%XX` escapes decoded (any other byte kept as it is), or `nil` when an
    /// escape is not `%` and two hex digits, or the bytes decoded are not UTF-8: Foundation's
    /// `removingPercentEncoding` without its `NSString`, and stricter where that repairs bytes
    /// that are not UTF-8 with U+FFFD (on Linux it does for some, not all): such bytes never
    /// become a name.
    public static func percentDecoded(_ text: Substring) -> String? {
        var text = text
        return text.withUTF8 { percentDecoded($0) }
    }

    /// ``percentDecoded(_:)-(Substring)`` of UTF-8 bytes in place.
    package static func percentDecoded(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard bytes.contains(UInt8(ascii: "%")) else { return String(validating: bytes, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            guard byte == UInt8(ascii: "%") else {
                decoded.append(byte)
                continue
            }
            guard index + 1 < bytes.count, let high = hexValue(bytes[index]), let low = hexValue(bytes[index + 1]) else {
                return nil
            }
            index += 2
            decoded.append(high << 4 | low)
        }
        return String(validating: decoded, as: UTF8.self)
    }

    /// ``percentDecoded(_:)-(Substring)`` of a whole string.
    public static func percentDecoded(_ text: String) -> String? { percentDecoded(text[...]) }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
