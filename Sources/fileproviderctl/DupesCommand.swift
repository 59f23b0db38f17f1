import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

struct DupesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dupes",
        abstract: "List files holding the same contents, across every domain, offline.",
        discussion: """
            From the database, nothing downloaded. Files of one size are grouped: when every \
            one has a recorded content hash, a group per hash two or more share ('same hash'); \
            when one was never hashed, all of them, compared by size only ('same size only': \
            maybe the same contents). Empty files are left out. Groups are printed smallest \
            first, a line '# N files, SIZE, same hash HASH' (or 'same size only') and then \
            their DOMAIN:/path, a blank line between groups. --json prints an array of groups \
            with size, comparedBy (contentHash or size), contentHash and files.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let manager = try global.manager()
        let terminal = isatty(STDOUT_FILENO) == 1
        let encoder = Output.jsonEncoder()
        var first = true
        if output.json { Output.write("[") }
        try await manager.duplicates(pageSize: ItemPages.pageSize) { groups throws(FileProviderError) in
            var text = ""
            for group in groups {
                if output.json {
                    guard let data = try? encoder.encode(GroupJSON(group)) else { continue }
                    text += (first ? "\n" : ",\n") + String(decoding: data, as: UTF8.self)
                } else {
                    let how = group.comparedBy == .contentHash ? "same hash \(group.contentHash ?? "")" : "same size only"
                    text +=
                        (first ? "" : "\n") + "# \(group.files.count) files, \(Output.bytes(group.size)) (\(group.size) bytes), \(how)\n"
                    for file in group.files { text += (terminal ? TerminalText.quoted(file.location) : file.location) + "\n" }
                }
                first = false
            }
            Output.write(text)
        }
        if output.json { Output.write(first ? "]\n" : "\n]\n") }
    }
}

/// A group of `dupes --json`.
private struct GroupJSON: Encodable {
    var size: Int64
    var comparedBy: String
    var contentHash: String?
    var files: [CopyJSON]

    init(_ group: SameContent) {
        size = group.size
        comparedBy = group.comparedBy.rawValue
        contentHash = group.contentHash
        files = group.files.map(CopyJSON.init)
    }

    func encode(to encoder: any Encoder) throws {
        enum Keys: String, CodingKey { case size, comparedBy, contentHash, files }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(size, forKey: .size)
        try container.encode(comparedBy, forKey: .comparedBy)
        try container.encode(contentHash, forKey: .contentHash)
        try container.encode(files, forKey: .files)
    }
}
