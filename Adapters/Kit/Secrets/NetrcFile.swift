import Foundation
import ProviderCore

/// A netrc file (`~/.netrc`, as ftp, curl and git read it): `machine HOST login USER password
/// SECRET` entries.
///
/// Tokens are separated by spaces, tabs or newlines; a token may be double-quoted (with `\"`
/// and `\\` inside), as curl reads them. `macdef` definitions are skipped up to the next empty
/// line. A `default` entry is never used: it would send a password to every host.
public struct NetrcFile: Sendable, Equatable {
    /// One `machine` entry.
    public struct Entry: Sendable, Equatable {
        public var machine: String
        public var login: String?
        public var password: String?
    }

    public var entries: [Entry]

    /// Parses the text of a netrc file.
    public init(text: String) {
        entries = []
        var tokens = Self.tokens(text)[...]
        var current: Entry?
        while let token = tokens.popFirst() {
            switch token {
            case "machine":
                if let current { entries.append(current) }
                current = tokens.popFirst().map { Entry(machine: $0) }
            case "default":
                if let current { entries.append(current) }
                current = nil
            case "login":
                let value = tokens.popFirst()
                current?.login = value
            case "password":
                let value = tokens.popFirst()
                current?.password = value
            case "account":
                _ = tokens.popFirst()
            default:
                break
            }
        }
        if let current { entries.append(current) }
    }

    /// Reads the netrc file at `path`.
    ///
    /// - Throws: `noSuchItem` when there is no file there; `invalidArgument` when it cannot be
    ///   read, is not a regular file or is larger than 1 MiB.
    public init(contentsOf path: String) throws(FileProviderError) {
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT { throw FileProviderError(.noSuchItem, "no such file") }
            throw FileProviderError(.invalidArgument, String(cString: strerror(errno)))
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw FileProviderError(.invalidArgument, "not a regular file") }
        guard status.st_size <= 1 << 20 else { throw FileProviderError(.invalidArgument, "larger than 1 MiB") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FileProviderError(.invalidArgument, "cannot be read")
        }
        self.init(text: String(decoding: data, as: UTF8.self))
    }

    /// The first entry for one of `machines` (in their order) with a password, and with the
    /// login `login` when one is given.
    public func entry(forAnyOf machines: [String], login: String?) -> Entry? {
        for machine in machines {
            if let found = entries.first(where: {
                $0.machine == machine && $0.password != nil && (login == nil || $0.login == login)
            }) {
                return found
            }
        }
        return nil
    }

    /// The words of `text`, with `macdef` bodies left out.
    static func tokens(_ text: String) -> [String] {
        var result: [String] = []
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        while let line = lines.popFirst() {
            let words = Self.words(line)
            if let index = words.firstIndex(of: "macdef") {
                result += words[..<index]
                // The definition runs to the next empty line.
                while let next = lines.popFirst(), !next.allSatisfy(\.isWhitespace) {}
                continue
            }
            result += words
        }
        return result
    }

    private static func words(_ line: Substring) -> [String] {
        var words: [String] = []
        var characters = line[...]
        while true {
            while let first = characters.first, first == " " || first == "\t" || first == "\r" { characters.removeFirst() }
            guard let first = characters.first else { return words }
            var word = ""
            if first == "\"" {
                characters.removeFirst()
                while let character = characters.popFirst(), character != "\"" {
                    if character == "\\", let escaped = characters.popFirst() {
                        word.append(escaped)
                    } else {
                        word.append(character)
                    }
                }
            } else {
                while let character = characters.first, character != " " && character != "\t" && character != "\r" {
                    word.append(character)
                    characters.removeFirst()
                }
            }
            words.append(word)
        }
    }
}
