import Foundation

/// JSON written by hand where an encoder would cost more than the work around it (listings of
/// 10,000 items, a journal entry per upload).
public enum JSONText {
    /// `string` as a JSON string literal, quotes included: `"`, `\` and control characters
    /// escaped, everything else as it is.
    public static func quoted(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// A JSON object of string values, keys sorted.
    public static func object(_ values: [String: String]) -> String {
        "{" + values.keys.sorted().map { quoted($0) + ":" + quoted(values[$0] ?? "") }.joined(separator: ",") + "}"
    }
}
