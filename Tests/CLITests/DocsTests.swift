import Foundation
import Testing

/// The docs stay true: Docs/CLI.md has a section for every command the binary has and names
/// each of its options there (`--help` of every command is the reference); Docs/Architecture.md
/// lists every target of Package.swift, every package it depends on with its version, and every
/// system library.
@Suite struct DocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func read(_ relative: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(relative), encoding: .utf8)
    }

    /// The lines of a `--help` section (`OPTIONS:`, `SUBCOMMANDS:`), up to the next one.
    static func section(_ name: String, of help: String) -> [Substring] {
        var lines: [Substring] = []
        var inside = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if let first = line.first, first != " " {
                inside = line == name + ":"
                continue
            }
            if inside { lines.append(line) }
        }
        return lines
    }

    /// The text of CLI.md from `## heading` (or `### heading`) to the next `## `, or `nil`.
    static func section(titled heading: String, in text: String) -> Substring? {
        guard let start = text.range(of: "\n## \(heading)\n") ?? text.range(of: "\n### \(heading)\n") else { return nil }
        let rest = text[start.upperBound...]
        return rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)]
    }

    /// Options every command takes: described once, in "Common options".
    static let common: Set<String> = ["--home", "--verbose", "--quiet", "--log-level", "--log-file", "--json", "--help", "--version"]

    @Test func cliMdHasEveryCommandAndOption() async throws {
        let cli = CLIRunner(home: FileManager.default.temporaryDirectory.appendingPathComponent("fpk-docs-unused"))
        let doc = try Self.read("Docs/CLI.md")
        let commonSection = try #require(Self.section(titled: "Common options", in: doc))
        for option in Self.common {
            #expect(commonSection.contains("`\(option)"), "CLI.md's Common options lack \(option)")
        }
        var queue: [[String]] = [[]]
        var leaves = 0
        while let path = queue.popLast() {
            let help = try await cli.run(path + ["--help"], withHome: false)
            #expect(help.status == 0, "\(path): \(help.stderr)")
            let subcommands = Self.section("SUBCOMMANDS", of: help.stdout).compactMap { line -> String? in
                guard let match = line.firstMatch(of: /^  ([a-z][a-z-]*)(\s|$)/) else { return nil }
                return String(match.1)
            }.filter { $0 != "help" }
            if !subcommands.isEmpty {
                queue += subcommands.map { path + [$0] }
                continue
            }
            leaves += 1
            let name = path.joined(separator: " ")
            guard let text = Self.section(titled: name, in: doc) else {
                Issue.record("Docs/CLI.md has no section '## \(name)'")
                continue
            }
            #expect(doc.contains("fileproviderctl \(path.first ?? "")"), "CLI.md's synopsis lacks \(name)")
            for line in Self.section("OPTIONS", of: help.stdout) {
                guard let match = line.firstMatch(of: /^  (?:-[A-Za-z], )?(--[a-z0-9-]+)/) else { continue }
                let option = String(match.1)
                if Self.common.contains(option) { continue }
                // `--[no-]progress` names `--progress` and `--no-progress`.
                let bare = option.hasPrefix("--no-") ? String(option.dropFirst(5)) : String(option.dropFirst(2))
                #expect(
                    text.contains(option) || text.contains("--[no-]\(bare)"), "Docs/CLI.md's section '\(name)' does not mention \(option)")
            }
        }
        #expect(leaves > 25)
    }

    @Test func architectureMdListsThePackagesTargetsAndSystemLibraries() throws {
        // The kit's manifest and media-server's (a package of its own, Servers/media-server).
        let manifest = try Self.read("Package.swift") + "\n" + Self.read("Servers/media-server/Package.swift")
        let doc = try Self.read("Docs/Architecture.md")
        let dependencies = try #require(Self.section(titled: "Dependencies", in: doc))
        let modules = try #require(Self.section(titled: "Modules", in: doc))

        var packages = 0
        for match in manifest.matches(of: /\.package\(url: "https:\/\/github\.com\/[^\/]+\/([^"]+)", exact: "([^"]+)"\)/) {
            packages += 1
            #expect(dependencies.contains("[\(match.1)]"), "Architecture.md's Dependencies lack the package \(match.1)")
            #expect(dependencies.contains("exactly \(match.2)"), "Architecture.md's Dependencies lack \(match.1)'s version \(match.2)")
        }
        #expect(packages >= 4)

        var targets = 0
        for match in manifest.matches(of: /\.(?:target|executableTarget|systemLibrary|plugin)\(\s*name: "([^"]+)"/) {
            targets += 1
            #expect(modules.contains("`\(match.1)`"), "Architecture.md's Modules lack the target \(match.1)")
        }
        #expect(targets >= 15)

        for match in manifest.matches(of: /pkgConfig: "([^"]+)", providers: \[\.apt\(\["([^"]+)"\]\)\]/) {
            #expect(dependencies.contains(String(match.1)), "Architecture.md's Dependencies lack the system library \(match.1)")
            #expect(dependencies.contains("`\(match.2)`"), "Architecture.md's Dependencies lack the package \(match.2)")
        }
        for library in ["libsqlite3", "libgd"] {
            #expect(dependencies.contains(library), "Architecture.md's Dependencies lack \(library)")
        }
    }
}
