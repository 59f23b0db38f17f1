import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

struct WhereisCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "whereis",
        abstract: "Show every domain and path holding the same contents as a file, offline.",
        discussion: """
            From the database, nothing downloaded: the file itself first, then every file of \
            every domain with the same recorded content hash ('same hash'), and every file of \
            the same size where one of the two was never hashed ('same size only': maybe the \
            same contents, not compared). Files whose hash differs are left out. --json prints \
            an array of objects with domain, path, location, size, contentHash and comparedBy \
            (contentHash or size).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: ArgumentHelp("A file: DOMAIN:/path or a path inside a replica.", valueName: "path"), completion: .itemPaths)
    var path: String

    func run() async throws {
        let manager = try global.manager()
        let found = try await manager.whereis(try manager.resolve(path))
        if output.json {
            try Output.json(found.map(CopyJSON.init))
            return
        }
        let terminal = isatty(STDOUT_FILENO) == 1
        var text = ""
        for (index, copy) in found.enumerated() {
            let shown = terminal ? TerminalText.quoted(copy.location) : copy.location
            let how = index == 0 ? "this file" : copy.comparedBy == .contentHash ? "same hash" : "same size only"
            text += shown + "  (" + how + ")\n"
        }
        Output.write(text)
    }
}

/// A file of `whereis --json` and `dupes --json`.
struct CopyJSON: Encodable {
    var domain: String
    var path: String
    var location: String
    var size: Int64
    var contentHash: String?
    var comparedBy: String

    init(_ copy: ContentLocation) {
        domain = copy.domain
        path = "/" + copy.path
        location = copy.location
        size = copy.size
        contentHash = copy.contentHash
        comparedBy = copy.comparedBy.rawValue
    }

    func encode(to encoder: any Encoder) throws {
        enum Keys: String, CodingKey { case domain, path, location, size, contentHash, comparedBy }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(domain, forKey: .domain)
        try container.encode(path, forKey: .path)
        try container.encode(location, forKey: .location)
        try container.encode(size, forKey: .size)
        try container.encode(contentHash, forKey: .contentHash)
        try container.encode(comparedBy, forKey: .comparedBy)
    }
}
