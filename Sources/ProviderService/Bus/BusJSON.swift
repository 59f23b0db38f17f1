import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The JSON the D-Bus methods return: the bytes `fileproviderctl --json` prints for the same
/// value (compact, keys sorted, slashes not escaped, dates in RFC 3339 UTC with microseconds).
enum BusJSON {
    /// `value` as the CLI's `--json` writes it, without the final newline.
    /// - Throws: what `JSONEncoder` throws (never for the engine's plain values).
    static func text<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encoder().encode(value), as: UTF8.self)
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(BusJSON.date(date))
        }
        return encoder
    }

    /// `2026-11-21T12:09:36.123456Z`, as the CLI writes dates.
    static func date(_ date: Date) -> String {
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
