import Foundation

/// JSON written by hand where an encoder would cost more than the work around it (listings of
/// 10,000 items, a journal entry per upload).
public enum JSONText {
    /// `string` as a JSON string literal, quotes included: `"`, `\` and control characters
    /// escaped, everything else as it is.
    public static func quoted(_ string: String) -> String {
        var out = ""
        append(quoted: string, to: &out)
        return out
    }

    /// Appends ``quoted(_:)`` of `string` to `out`.
    public static func append(quoted string: String, to out: inout String) {
        out += "\""
        append(escaped: string, to: &out)
        out += "\""
    }

    /// Appends `string` escaped for the inside of a JSON string literal (no quotes around it).
    public static func append(escaped string: String, to out: inout String) {
        // Most strings need no escape: one pass over the bytes, one copy.
        if string.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            out += string
            return
        }
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
    }

    /// A JSON object of string values, keys sorted.
    public static func object(_ values: [String: String]) -> String {
        "{" + values.keys.sorted().map { quoted($0) + ":" + quoted(values[$0] ?? "") }.joined(separator: ",") + "}"
    }
}
