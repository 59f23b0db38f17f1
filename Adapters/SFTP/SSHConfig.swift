import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The built-in reader of an ssh config file, used only when there is no `ssh` program to ask
/// (``SSHResolver``): `HostName`, `Port`, `User` and `IdentityFile`, from `Host` blocks
/// (patterns with `*`, `?` and `!`). As in OpenSSH, the first value found for a setting wins
/// and `IdentityFile`s add up. `Match` blocks and `Include` are not read.
struct SSHConfig: Sendable {
    struct Block: Sendable {
        var patterns: [String]
        var settings: [(key: String, value: String)]
    }

    /// What the file says about one host.
    struct Resolved: Sendable, Equatable {
        var hostName: String?
        var port: Int?
        var user: String?
        var identityFiles: [String] = []
    }

    var blocks: [Block]

    /// Reads a config file; `nil` when it does not exist or cannot be read.
    static func load(_ path: String) -> SSHConfig? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return SSHConfig(parsing: text)
    }

    init(parsing text: String) {
        var blocks = [Block(patterns: ["*"], settings: [])]
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let (key, value) = Self.split(line) else { continue }
            switch key {
            case "host":
                blocks.append(Block(patterns: Self.words(value), settings: []))
            case "match":
                blocks.append(Block(patterns: [], settings: []))  // never matches
            default:
                blocks[blocks.count - 1].settings.append((key, value))
            }
        }
        self.blocks = blocks
    }

    /// `Key Value` or `Key=Value`, the key lowercased, quotes removed from the value.
    private static func split(_ line: String) -> (String, String)? {
        guard let end = line.firstIndex(where: { $0 == " " || $0 == "\t" || $0 == "=" }) else { return nil }
        let key = line[..<end].lowercased()
        var rest = line[end...].drop { $0 == " " || $0 == "\t" }
        if rest.first == "=" { rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" } }
        var value = String(rest).trimmingCharacters(in: .whitespaces)
        if value.count >= 2 && value.hasPrefix("\"") && value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
        return (key, value)
    }

    private static func words(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," }).map(String.init)
    }

    /// Whether a `Host` line's patterns select `host`: one pattern matches and no negated one does.
    static func matches(_ patterns: [String], host: String) -> Bool {
        var matched = false
        for pattern in patterns {
            if pattern.hasPrefix("!") {
                if fnmatch(String(pattern.dropFirst()), host, 0) == 0 { return false }
            } else if fnmatch(pattern, host, 0) == 0 {
                matched = true
            }
        }
        return matched
    }

    /// The settings for `host`; identity file names as written (``SSHTokens`` expands them).
    func resolve(_ host: String) -> Resolved {
        var result = Resolved()
        for block in blocks where Self.matches(block.patterns, host: host) {
            for (key, value) in block.settings {
                switch key {
                case "hostname" where result.hostName == nil: result.hostName = value
                case "port" where result.port == nil: result.port = Int(value)
                case "user" where result.user == nil: result.user = value
                case "identityfile": result.identityFiles.append(value)
                default: break
                }
            }
        }
        return result
    }
}
