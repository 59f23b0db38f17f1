import Foundation
import GRDB

#if canImport(Glibc)
    import Glibc
#endif

/// A date as GRDB stores it (`yyyy-MM-dd HH:mm:ss.SSS`, UTC), written without GRDB's shared
/// `DateFormatter`: on Linux each of its strings is an ICU format call under a lock, and sync up
/// wrote three of them per uploaded file (the journal entry's dates), about 1% of the CPU of
/// 10,000 uploads. GRDB reads the text back as it reads its own.
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
