import Foundation
import GRDB

#if canImport(Glibc)
    import Glibc
#endif

/// A date as GRDB stores it (`yyyy-MM-dd HH:mm:ss.SSS`, UTC), written without GRDB's shared
/// `DateFormatter`: on Linux each of its strings is an ICU format call under a lock, and sync up
/// wrote three of them per uploaded file (the journal entry's dates), about 1% of the CPU of
/// 10,000 uploads. GRDB reads the text back as it reads its own; ``date(_:)`` reads it without
/// GRDB's UTC `Calendar` (made on first use, 0.7 ms of a command's start-up).
enum StoredDate {
    /// The value to bind for `date`: its text where ``text(_:)`` makes one, else the date
    /// itself (GRDB formats it); `nil` for `nil`.
    static func value(_ date: Date?) -> (any DatabaseValueConvertible)? {
        guard let date else { return nil }
        return text(date) ?? date
    }

    /// `date` as `yyyy-MM-dd HH:mm:ss.SSS` in UTC, to the nearest millisecond (half a
    /// millisecond up) as Foundation's formatter writes it; `nil` before 1900 (ICU's calendar
    /// is Julian before 1582) and from the year 10000 on.
    static func text(_ date: Date) -> String? {
        let millis = ((date.timeIntervalSinceReferenceDate + Date.timeIntervalBetween1970AndReferenceDate) * 1000 + 0.5).rounded(.down)
        // 1900-01-01 up to 10000-01-01, in milliseconds since 1970.
        guard millis.isFinite, millis >= -2_208_988_800_000, millis < 253_402_300_800_000 else { return nil }
        let whole = Int64(millis)
        let fraction = Int(((whole % 1000) + 1000) % 1000)
        var seconds = time_t((whole - Int64(fraction)) / 1000)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return nil }
        var bytes = [UInt8](repeating: 0, count: 23)
        func put(_ value: Int, at offset: Int, digits: Int) {
            var value = value
            for index in stride(from: offset + digits - 1, through: offset, by: -1) {
                bytes[index] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
        }
        put(Int(parts.tm_year) + 1900, at: 0, digits: 4)
        bytes[4] = UInt8(ascii: "-")
        put(Int(parts.tm_mon) + 1, at: 5, digits: 2)
        bytes[7] = UInt8(ascii: "-")
        put(Int(parts.tm_mday), at: 8, digits: 2)
        bytes[10] = UInt8(ascii: " ")
        put(Int(parts.tm_hour), at: 11, digits: 2)
        bytes[13] = UInt8(ascii: ":")
        put(Int(parts.tm_min), at: 14, digits: 2)
        bytes[16] = UInt8(ascii: ":")
        put(Int(parts.tm_sec), at: 17, digits: 2)
        bytes[19] = UInt8(ascii: ".")
        put(fraction, at: 20, digits: 3)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension StoredDate {
    /// The date in column `column` of `row`, read without GRDB's UTC `Calendar` when it is
    /// text of the form ``text(_:)`` writes (``date(_:)``); GRDB reads any other value.
    /// - Throws: GRDB's decoding error for `NULL`, a missing column or a value that is no date.
    static func decode(_ row: Row, _ column: String) throws -> Date {
        if let date = try decodeIfPresent(row, column) { return date }
        return try row.decode(Date.self, forColumn: column)
    }

    /// ``decode(_:_:)`` of a column that may be `NULL` (`nil` then).
    /// - Throws: as ``decode(_:_:)``, but not for `NULL`.
    static func decodeIfPresent(_ row: Row, _ column: String) throws -> Date? {
        let value: DatabaseValue = try row.decode(forColumn: column)
        if case .string(let text) = value.storage, let date = date(text) { return date }
        return try row.decode(Date?.self, forColumn: column)
    }

    /// The date `text` names when it is `yyyy-MM-dd HH:mm:ss` (UTC) with optional fractional
    /// seconds of 1 to 9 digits, years 1900 to 9999 (what GRDB writes, and ``text(_:)``);
    /// `nil` for anything else, which GRDB then reads. The date the text names, to the
    /// nanosecond it may give (GRDB's calendar keeps milliseconds, and drifts by microseconds in
    /// far years).
    static func date(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes -> Date? in
            guard bytes.count >= 19, bytes.count <= 29, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
                bytes[10] == UInt8(ascii: " "), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":")
            else { return nil }
            func number(_ start: Int, _ count: Int) -> Int? {
                var value = 0
                for index in start..<(start + count) {
                    let digit = Int(bytes[index]) - Int(UInt8(ascii: "0"))
                    guard digit >= 0, digit <= 9 else { return nil }
                    value = value * 10 + digit
                }
                return value
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
                let minute = number(14, 2), let second = number(17, 2), year >= 1900, (1...12).contains(month),
                day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60, second < 60
            else { return nil }
            var nanos = 0
            if bytes.count > 19 {
                let digits = bytes.count - 20
                guard bytes[19] == UInt8(ascii: "."), digits >= 1, let fraction = number(20, digits) else { return nil }
                nanos = fraction
                for _ in digits..<9 { nanos *= 10 }
            }
            let days = daysSince1970(year: year, month: month, day: day)
            let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second
            return Date(timeIntervalSince1970: Double(seconds) + Double(nanos) / 1e9)
        }
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the given day of the proleptic Gregorian calendar.
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
