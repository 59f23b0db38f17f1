import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The JSON every program of the project prints for an `Encodable` value: `fileproviderctl
/// --json` and the D-Bus interface of `serve` give the same bytes (compact, keys sorted, slashes
/// not escaped, dates as ``date(_:)``).
extension JSONText {
    /// The encoder of every JSON output.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(JSONText.date(date))
        }
        return encoder
    }

    /// `value` as JSON, without a final newline.
    /// - Throws: what `JSONEncoder` throws (never for the engine's plain values).
    public static func text<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encoder().encode(value), as: UTF8.self)
    }

    /// A date as every JSON output writes it: RFC 3339 in UTC with microseconds,
    /// `2026-11-21T12:09:36.123456Z`. Without DateFormatter (slow for many rows).
    public static func date(_ date: Date) -> String {
        // Dates outside four-digit years cannot come from a checked store; clamp rather than trap.
        let raw = date.timeIntervalSince1970
        let interval = raw.isFinite ? max(-62_135_596_800, min(253_402_300_799, raw)) : 0
        var whole = interval.rounded(.down)
        var micros = Int(((interval - whole) * 1_000_000).rounded())
        if micros >= 1_000_000 {
            whole += 1
            micros -= 1_000_000
        }
        var seconds = time_t(whole)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let fraction = String(micros)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self) + "."
            + String(repeating: "0", count: 6 - fraction.count) + fraction + "Z"
    }
}
