import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

struct FindCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Find items of every domain from the database, offline, downloaded or not.",
        discussion: """
            Searches the database, never the stores or the replica folders, so files that are \
            not downloaded are found under their real names. The tests are GNU find's and \
            all must hold: -name/-iname match the name with a glob, -path/-ipath the path \
            starting with '/' (a '*' matches '/' too), -regex/-iregex the whole path starting \
            with '/' with a POSIX extended expression; -size, -mtime and -mmin compare as GNU \
            find does (-size +10M: more than 10 MiB, rounded up to whole units c, w, b, k, M, G; \
            folders have size 0); -type f, d or l. --state asks for downloaded (the contents are \
            in the replica), dataless (a file not downloaded or a folder not populated), pinned \
            (content policy eager, set or inherited), conflicted (a conflict was recorded, \
            'fileproviderctl conflicts') or unsent (a local change the store does not have yet, \
            'fileproviderctl pending'; this one scans the replica). --hash takes algorithm:hex \
            or the hex digits alone. Each found item is printed as DOMAIN:/path (--local: where \
            it is in the replica folder); -print0 ends each with a NUL for 'xargs -0'; --json \
            prints an array of objects with domain, path, location, local, kind, size, \
            modified, state and contentHash. Items come as read, a page at a time, in no \
            particular order; nothing found is not an error (exit 0).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(
        help: ArgumentHelp("Where to look: DOMAIN or DOMAIN:/path (every domain when none is given).", valueName: "domain[:path]"),
        completion: .itemPaths)
    var scopes: [String] = []

    @Option(
        name: .customLong("name", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("A glob the item's name matches.", valueName: "glob"))
    var names: [String] = []
    @Option(
        name: .customLong("iname", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("As -name, ignoring case.", valueName: "glob"))
    var inames: [String] = []
    @Option(
        name: .customLong("path", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("A glob the item's path, starting with '/', matches.", valueName: "glob"))
    var paths: [String] = []
    @Option(
        name: .customLong("ipath", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("As -path, ignoring case.", valueName: "glob"))
    var ipaths: [String] = []
    @Option(
        name: .customLong("regex", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("An extended regular expression the whole path, starting with '/', matches.", valueName: "regex"))
    var regexes: [String] = []
    @Option(
        name: .customLong("iregex", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("As -regex, ignoring case.", valueName: "regex"))
    var iregexes: [String] = []
    @Option(name: .customLong("type", withSingleDash: true), help: "f (file), d (folder), l (symlink); several as f,d.")
    var types: [String] = []
    @Option(
        name: .customLong("size", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: "[+|-]N[cwbkMG]: size more than, less than or exactly N units (512-byte blocks without a unit).")
    var sizes: [String] = []
    @Option(
        name: .customLong("mtime", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: "[+|-]N: modified more than, less than or exactly N days ago (whole days).")
    var mtimes: [String] = []
    @Option(
        name: .customLong("mmin", withSingleDash: true), parsing: .unconditionalSingleValue,
        help: "[+|-]N: modified more than, less than or exactly N minutes ago (whole minutes).")
    var mmins: [String] = []
    @Option(name: .long, help: "downloaded, dataless, pinned, conflicted or unsent; several as downloaded,pinned (all must hold).")
    var state: [String] = []
    @Option(name: .long, help: "A recorded content hash: algorithm:hex or the hex digits.")
    var hash: String?
    @Flag(name: .long, help: "Print where each item is in its replica folder instead of DOMAIN:/path.")
    var local = false
    @Flag(name: .customLong("print0", withSingleDash: true), help: "End each printed path with a NUL instead of a newline.")
    var print0 = false

    func validate() throws {
        if print0 && output.json { throw ValidationError("-print0 and --json cannot be used together") }
    }

    func run() async throws {
        let manager = try global.manager()
        var query = SearchQuery()
        query.filter = try filter()
        for scope in scopes {
            if !scope.contains(":") && !scope.contains("/") {
                _ = try manager.domain(named: scope)
                query.scopes.append(.init(domain: scope))
            } else {
                let location = try manager.resolve(scope)
                query.scopes.append(.init(domain: location.domain, path: location.path))
            }
        }
        for word in state.flatMap({ $0.split(separator: ",").map(String.init) }) {
            switch word {
            case "downloaded": query.filter.downloaded = true
            case "dataless": query.filter.dataless = true
            case "pinned": query.pinned = true
            case "conflicted": query.conflicted = true
            case "unsent": query.unsent = true
            default:
                throw ValidationError("unknown state '\(word)': use downloaded, dataless, pinned, conflicted or unsent")
            }
        }
        let terminal = isatty(STDOUT_FILENO) == 1
        var first = true
        if output.json { Output.write("[") }
        let encoder = Output.jsonEncoder()
        try await manager.search(query, pageSize: ItemPages.pageSize) { results throws(FileProviderError) in
            var text = ""
            text.reserveCapacity(results.count * 64)
            for result in results {
                if output.json {
                    guard let data = try? encoder.encode(FoundItem(result)) else { continue }
                    text += (first ? "\n" : ",\n") + String(decoding: data, as: UTF8.self)
                } else {
                    let shown = local ? result.localPath : result.location
                    // As GNU find: names as they are for pipes, escaped for a terminal.
                    text += print0 ? shown + "\0" : (terminal ? TerminalText.quoted(shown) : shown) + "\n"
                }
                first = false
            }
            Output.write(text)
        }
        if output.json { Output.write(first ? "]\n" : "\n]\n") }
    }

    /// The database's tests from the options.
    /// - Throws: `ValidationError` for a value that does not parse.
    private func filter() throws -> ItemFilter {
        var filter = ItemFilter()
        filter.names = names.map { .init($0) } + inames.map { .init($0, ignoresCase: true) }
        filter.paths = paths.map { .init($0) } + ipaths.map { .init($0, ignoresCase: true) }
        filter.regexes = regexes.map { .init($0) } + iregexes.map { .init($0, ignoresCase: true) }
        for letter in types.flatMap({ $0.split(separator: ",") }) {
            switch letter {
            case "f": filter.kinds.insert(.file)
            case "d": filter.kinds.insert(.folder)
            case "l": filter.kinds.insert(.symlink)
            default: throw ValidationError("-type takes f, d or l, not '\(letter)'")
            }
        }
        for size in sizes {
            let (comparison, digits) = try Self.signed(size, option: "-size")
            let units: [Character: Int64] = ["c": 1, "w": 2, "b": 512, "k": 1 << 10, "M": 1 << 20, "G": 1 << 30]
            var number = digits
            var unit: Int64 = 512
            if let last = digits.last, let value = units[last] {
                unit = value
                number = String(digits.dropLast())
            }
            guard let count = Int64(number), count >= 0 else {
                throw ValidationError("-size takes [+|-]N[cwbkMG], as 100k or +10M, not '\(size)'")
            }
            filter.sizes.append(.init(comparison, count, unit: unit))
        }
        let now = Date()
        for (values, seconds, option) in [(mtimes, 86_400.0, "-mtime"), (mmins, 60.0, "-mmin")] {
            for value in values {
                let (comparison, digits) = try Self.signed(value, option: option)
                guard let count = Int64(digits), count >= 0 else {
                    throw ValidationError("\(option) takes [+|-]N, as 7 or -2, not '\(value)'")
                }
                // The whole units since the modification, fraction dropped, compared with N.
                let newest = now.addingTimeInterval(-Double(count) * seconds)
                let oldest = now.addingTimeInterval(-Double(count + 1) * seconds)
                switch comparison {
                case .greater: filter.modified.append(.init(.less, oldest, inclusive: true))
                case .less: filter.modified.append(.init(.greater, newest, inclusive: false))
                case .equal:
                    filter.modified.append(.init(.greater, oldest, inclusive: false))
                    filter.modified.append(.init(.less, newest, inclusive: true))
                }
            }
        }
        if let hash {
            let hex = hash.split(separator: ":").last.map(String.init) ?? ""
            guard !hex.isEmpty, hex.allSatisfy(\.isHexDigit) else {
                throw ValidationError("--hash takes algorithm:hex or hex digits, as sha256:9f86d0..., not '\(hash)'")
            }
            filter.contentHash = hash
        }
        return filter
    }

    /// A leading `+` (greater) or `-` (less), and the rest.
    private static func signed(_ value: String, option: String) throws -> (ItemFilter.Comparison, String) {
        if value.hasPrefix("+") { return (.greater, String(value.dropFirst())) }
        if value.hasPrefix("-") { return (.less, String(value.dropFirst())) }
        return (.equal, value)
    }
}

/// One item of `find --json`.
private struct FoundItem: Encodable {
    var domain: String
    var path: String
    var location: String
    var local: String
    var kind: String
    var size: Int64
    var modified: Date?
    var state: String
    var contentHash: String?

    init(_ result: SearchResult) {
        domain = result.domain
        path = "/" + result.record.path
        location = result.location
        local = result.localPath
        kind = result.record.kind.rawValue
        size = result.record.size
        modified = result.record.modificationDate
        state = result.record.stateLabel
        contentHash = result.record.comparableHash
    }

    func encode(to encoder: any Encoder) throws {
        enum Keys: String, CodingKey { case domain, path, location, local, kind, size, modified, state, contentHash }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(domain, forKey: .domain)
        try container.encode(path, forKey: .path)
        try container.encode(location, forKey: .location)
        try container.encode(local, forKey: .local)
        try container.encode(kind, forKey: .kind)
        try container.encode(size, forKey: .size)
        try container.encode(modified, forKey: .modified)
        try container.encode(state, forKey: .state)
        try container.encode(contentHash, forKey: .contentHash)
    }
}
