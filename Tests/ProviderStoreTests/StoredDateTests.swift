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
}
