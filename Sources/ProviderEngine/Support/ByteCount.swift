import Foundation
import ProviderCore

/// Sizes as users type and read them: binary units, `K`, `M`, `G`, `T` (1 K = 1024 bytes), as
/// `du -h` and `fallocate -l` take them.
public enum ByteCount {
    /// Parses `20G`, `512M`, `1.5T`, `300K`, `4096` (bytes), `20GiB`, `20 G`; the units are
    /// binary and case-insensitive.
    /// - Throws: `invalidArgument` saying what a size looks like: for an empty or negative
    ///   value, an unknown unit, a decimal unit (`GB`: say `G` or `GiB`, which are 1024³ bytes),
    ///   or a size past 8 EiB.
    public static func parse(_ text: String) throws(FileProviderError) -> Int64 {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let number = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        var unit = trimmed.dropFirst(number.count).trimmingCharacters(in: .whitespaces).lowercased()
        func invalid(_ why: String) -> FileProviderError {
            FileProviderError(
                .invalidArgument,
                "invalid size '\(text)': \(why); write a number with K, M, G or T (binary units: 1K = 1024 bytes, 1G = 1024³ bytes), for example 20G or 512M"
            )
        }
        guard !number.isEmpty, let value = Double(number), value.isFinite else {
            throw invalid(trimmed.hasPrefix("-") ? "a size cannot be negative" : "no number")
        }
        if unit.hasSuffix("ib") {
            unit.removeLast(2)
            if unit.isEmpty { throw invalid("unknown unit 'iB'") }
        } else if unit.count == 2, unit.hasSuffix("b") {
            throw invalid("'\(trimmed.dropFirst(number.count).trimmingCharacters(in: .whitespaces))' is ambiguous (decimal or binary?)")
        } else if unit == "b" {
            unit = ""
        }
        let shifts: [String: Int] = ["": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50]
        guard let shift = shifts[unit] else {
            throw invalid("unknown unit '\(trimmed.dropFirst(number.count).trimmingCharacters(in: .whitespaces))'")
        }
        let bytes = (value * Double(Int64(1) << shift)).rounded()
        guard bytes < 9.2e18 else { throw invalid("it is larger than 8 EiB") }
        if shift == 0 && value != value.rounded() { throw invalid("a number of bytes is whole") }
        return Int64(bytes)
    }

    /// A size, or `none` for no limit (`nil`).
    /// - Throws: as ``parse(_:)``.
    public static func parseOrNone(_ text: String) throws(FileProviderError) -> Int64? {
        if text.trimmingCharacters(in: .whitespaces).lowercased() == "none" { return nil }
        return try parse(text)
    }

    /// `21.3 GiB`, `20.0 GiB`, `512.0 KiB`, `100 B`: one decimal, binary units, as the CLI
    /// prints sizes everywhere.
    public static func format(_ bytes: Int64) -> String {
        if bytes < 1024 { return "\(max(0, bytes)) B" }
        var value = Double(bytes) / 1024
        for unit in ["KiB", "MiB", "GiB", "TiB"] {
            if value < 1024 { return String(format: "%.1f %@", value, unit) }
            value /= 1024
        }
        return String(format: "%.1f PiB", value)
    }
}
