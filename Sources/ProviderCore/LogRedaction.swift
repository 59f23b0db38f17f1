import Foundation

/// Masks secrets in what request logs print (`-vv`, `--log-level trace`): passwords and user
/// names in URLs, tokens in query strings, `Authorization` and similar headers, and options of
/// an external program whose names look secret. A masked value is written `***`.
///
/// A name looks secret when it holds one of ``secretWords`` (case-insensitive): `password`,
/// `passwd`, `secret`, `token`, `key`, `auth`, `credential`, `signature`, `sig`, `session`,
/// `cookie`. Masking too much is harmless; masking too little is not.
public enum LogRedaction {
    /// What a masked value is written as.
    public static let mask = "***"

    /// Parts of a name that make its value a secret.
    public static let secretWords = [
        "password", "passwd", "pass", "secret", "token", "key", "auth", "credential", "signature", "sig", "session",
        "cookie", "bearer",
    ]

    /// Whether a field, header or option called `name` holds a secret.
    public static func isSecret(name: String) -> Bool {
        let lowered = name.lowercased()
        return secretWords.contains { lowered.contains($0) }
    }

    /// `url` with a user name and password (`https://user:pw@host/`) masked, and the values of
    /// query fields whose names look secret (``isSecret(name:)``) masked.
    public static func url(_ url: String) -> String {
        var text = url
        if let scheme = text.range(of: "://") {
            let rest = text[scheme.upperBound...]
            let hostEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
            if let at = rest[..<hostEnd].lastIndex(of: "@") {
                text.replaceSubrange(scheme.upperBound..<at, with: mask)
            }
        }
        guard let question = text.firstIndex(of: "?") else { return text }
        let head = text[..<question]
        var query = text[text.index(after: question)...]
        var fragment = ""
        if let hash = query.firstIndex(of: "#") {
            fragment = String(query[hash...])
            query = query[..<hash]
        }
        return head + "?" + self.query(String(query)) + fragment
    }

    /// A query string (`a=1&token=xyz`) with the values of fields whose names look secret
    /// masked.
    public static func query(_ query: String) -> String {
        query.split(separator: "&", omittingEmptySubsequences: false).map { field -> String in
            guard let equals = field.firstIndex(of: "=") else { return String(field) }
            let name = String(field[..<equals]).removingPercentEncoding ?? String(field[..<equals])
            return isSecret(name: name) ? field[..<equals] + "=" + mask : String(field)
        }.joined(separator: "&")
    }

    /// A header line (`Authorization: Basic …`) with its value masked when the header's name
    /// looks secret (``isSecret(name:)``: `Authorization`, `Cookie`, `X-Auth-Token`, `X-Api-Key`…);
    /// for `Authorization`, the scheme stays (`Authorization: Bearer ***`).
    public static func header(_ line: String) -> String {
        guard let colon = line.firstIndex(of: ":") else { return line }
        let name = line[..<colon]
        guard isSecret(name: String(name)) else { return line }
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        if name.lowercased() == "authorization" || name.lowercased() == "proxy-authorization",
            let space = value.firstIndex(of: " ")
        {
            return "\(name): \(value[..<space]) \(mask)"
        }
        return "\(name): \(mask)"
    }

    /// `options` (an external program's `NAME=VALUE` options) with the values of those whose
    /// names look secret, or that `secret` names, masked.
    public static func options(_ options: [String: String], secret: Set<String> = []) -> [String: String] {
        var masked = options
        for (name, _) in options where secret.contains(name) || isSecret(name: name) { masked[name] = mask }
        return masked
    }

    /// A JSON value (from `JSONSerialization`) with the values of object keys that look secret
    /// masked, at any depth.
    public static func json(_ value: Any) -> Any {
        if let object = value as? [String: Any] {
            var masked: [String: Any] = [:]
            for (key, inner) in object { masked[key] = isSecret(name: key) ? mask : json(inner) }
            return masked
        }
        if let array = value as? [Any] { return array.map(json) }
        return value
    }
}
