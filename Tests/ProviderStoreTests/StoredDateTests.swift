import Foundation
import GRDB
import Testing

@testable import ProviderStore

/// ``StoredDate`` writes what GRDB's own formatter writes for the same date, so rows written
/// either way read back alike.
@Suite("Dates as GRDB stores them")
struct StoredDateTests {
    /// GRDB's text for `date`.
    static func grdb(_ date: Date) -> String? {
        if case .string(let text) = date.databaseValue.storage { return text }
        return nil
    }

    @Test func theTextIsGRDBsForDatesAcrossTheYearsAndTheirMilliseconds() {
        var generator = SystemRandomNumberGenerator()
        var dates: [Date] = [
            Date(), Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.0005), Date(timeIntervalSince1970: -1),
            Date(timeIntervalSince1970: 0.9995), Date(timeIntervalSince1970: 1_733_570_000.999_999_9),
            Date(timeIntervalSince1970: 951_782_400),  // 2000-02-29
            Date(timeIntervalSince1970: -2_208_988_800),  // 1900-01-01
            Date(timeIntervalSince1970: 253_402_300_799.999),  // 9999-12-31 23:59:59.999
            Date(timeIntervalSinceReferenceDate: 0.123_456),
        ]
        for _ in 0..<20_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: -2_208_988_800...7_258_118_400, using: &generator)))
            // Near whole milliseconds, where a rounding would differ from a cut.
            let near = (Double(Int64.random(in: 0...4_102_444_800_000, using: &generator)) + Double.random(in: -0.001...0.001)) / 1000
            dates.append(Date(timeIntervalSince1970: near))
        }
        for date in dates {
            #expect(StoredDate.text(date) == Self.grdb(date), "\(date.timeIntervalSince1970)")
        }
    }

    @Test func datesBefore1900OrPast9999AreLeftToGRDB() {
        for date in [Date(timeIntervalSince1970: -2_208_988_800.001), Date(timeIntervalSince1970: 253_402_300_800), Date.distantPast] {
            #expect(StoredDate.text(date) == nil)
            #expect(StoredDate.value(date) is Date)
        }
        #expect(StoredDate.value(nil) == nil)
    }

    /// ``StoredDate/date(_:)`` reads GRDB's text as the date GRDB's calendar reads (to the
    /// millisecond it keeps), the very date its text names, and leaves every other form to GRDB.
    @Test func theTextReadsBackAsGRDBReadsIt() throws {
        var generator = SystemRandomNumberGenerator()
        var texts = [
            "1970-01-01 00:00:00.000", "2000-02-29 23:59:59.999", "1900-01-01 00:00:00", "9999-12-31 23:59:59.5",
            "2026-12-07 13:45:01.123456789", "2024-02-29 12:00:00.1",
        ]
        for _ in 0..<20_000 {
            let date = Date(timeIntervalSince1970: Double.random(in: -2_208_988_800...253_402_300_799, using: &generator))
            texts.append(try #require(StoredDate.text(date)))
        }
        for text in texts {
            let ours = try #require(StoredDate.date(text), "\(text)")
            let theirs = try #require(Date.fromDatabaseValue(text.databaseValue), "\(text)")
            // GRDB's calendar keeps milliseconds, and its arithmetic drifts by some microseconds
            // in far years (…20.106 read as …20.105999 in 2254); ours is the text's date.
            #expect(abs(ours.timeIntervalSince1970 - theirs.timeIntervalSince1970) < 1e-3, "\(text)")
            if text.count == 23 { #expect(StoredDate.text(ours) == text) }
        }
        for other in [
            "2026-12-07", "2026-12-07T10:00:00", "2026-12-07 10:00", "2026-02-30 10:00:00", "2023-02-29 10:00:00",
            "1899-12-31 23:59:59", "2026-12-07 24:00:00", "2026-12-07 10:00:00.", "2026-12-07 10:00:00.1234567890",
            "2026-12-07 10:00:00Z", "2026-13-01 10:00:00", "２０２６-12-07 10:00:00", "",
        ] {
            #expect(StoredDate.date(other) == nil, "\(other)")
        }
    }

    /// A domain's dates written as text and as GRDB's numbers read back through the row decoder.
    @Test func aDomainRowReadsItsDatesInEitherForm() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a, b, c)")
            try db.execute(sql: "INSERT INTO t VALUES ('2026-12-07 13:45:01.250', 1733579101.25, NULL)")
            let row = try #require(try Row.fetchOne(db, sql: "SELECT * FROM t"))
            #expect(try StoredDate.decode(row, "a").timeIntervalSince1970 == 1_796_651_101.25)
            #expect(try StoredDate.decode(row, "b").timeIntervalSince1970 == 1_733_579_101.25)
            #expect(try StoredDate.decodeIfPresent(row, "c") == nil)
            #expect(throws: (any Error).self) { try StoredDate.decode(row, "c") }
        }
    }
}
