import Foundation
import Testing

/// The docs stay true: Docs/CLI.md has a section for every command the binary has and names
/// each of its options there (`--help` of every command is the reference); Docs/Architecture.md
/// lists every target of Package.swift at a path that exists, every package it depends on with
/// its version, and every system library, stays a page that can be kept true (at most 350
/// lines), and its import diagram draws only targets and only dependencies Package.swift has;
/// the Swift the guides quote names functions and types that exist in the sources.
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

    /// The targets of both manifests (this package's and media-server's) and the names each
    /// depends on (targets and products, as quoted in its `dependencies:`).
    static func targets() throws -> [String: Set<String>] {
        let manifest = try read("Package.swift") + "\n" + read("Servers/media-server/Package.swift")
        let starts = manifest.matches(of: /\.(?:target|executableTarget|systemLibrary|plugin|testTarget)\(\s*name: "([^"]+)"/)
        var targets: [String: Set<String>] = [:]
        for (index, match) in starts.enumerated() {
            let end = index + 1 < starts.count ? starts[index + 1].range.lowerBound : manifest.endIndex
            let text = manifest[match.range.upperBound..<end]
            var names: Set<String> = []
            if let list = text.firstMatch(of: /dependencies:\s*\[((?:[^\[\]]|\[[^\]]*\])*)\]/) {
                for quoted in list.1.matches(of: /"([^"]+)"/) { names.insert(String(quoted.1)) }
            }
            targets[String(match.1), default: []].formUnion(names)
        }
        return targets
    }

    @Test func architectureMdStaysAMapWhosePathsAndDiagramAreTrue() throws {
        let doc = try Self.read("Docs/Architecture.md")
        let lines = doc.split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(lines <= 350, "Architecture.md has \(lines) lines: move details to the page they belong to")
        let targets = try Self.targets()
        let modules = try #require(Self.section(titled: "Modules", in: doc))

        // Every row's path exists.
        var rows = 0
        for row in modules.matches(of: /\n\| `([^`]+)` \| `([^`]+)` \|/) {
            rows += 1
            var isFolder: ObjCBool = false
            let path = Self.root.appendingPathComponent(String(row.2)).path
            #expect(
                FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue,
                "Architecture.md: the module \(row.1) is at \(row.2), which is not a folder")
            #expect(targets[String(row.1)] != nil, "Architecture.md lists \(row.1), which is no target of Package.swift")
        }
        #expect(rows >= 20)

        // The diagram: every box is a target; every arrow of its summary lines is a dependency,
        // and every dependency between the modules it names is drawn (directly or through
        // others).
        let block = try #require(modules.firstMatch(of: /```\n((?:.|\n)*?)```/)?.1)
        let boxes = Set(block.matches(of: /│ +([A-Za-z][A-Za-z-]*) +│/).map { String($0.1) })
        #expect(boxes.count >= 6, "no boxes found in the diagram")
        for box in boxes { #expect(targets[box] != nil, "the diagram draws \(box), which is no target") }
        let short = [
            "Core": "ProviderCore", "Store": "ProviderStore", "System": "ProviderSystem", "Engine": "ProviderEngine",
            "Service": "ProviderService",
            "Kit": "AdapterKit", "Conformance": "ProviderConformance", "Testing": "ProviderTesting",
            "CLI": "fileproviderctl", "Adapters": "LocalAdapter",
        ]
        var edges: [String: Set<String>] = [:]
        for line in block.split(separator: "\n") where line.contains("←") {
            for chain in line.split(separator: /\s{2,}/) where chain.contains("←") {
                let names = chain.split(separator: "←").map { $0.trimmingCharacters(in: .whitespaces) }
                    .map { String($0.split(separator: " ").first ?? "") }
                for (lower, upper) in zip(names, names.dropFirst()) {
                    guard let from = short[upper], let to = short[lower] else {
                        Issue.record("the diagram's line '\(chain)' names a module the test does not know: \(lower) or \(upper)")
                        continue
                    }
                    #expect(targets[from]?.contains(to) == true, "the diagram says \(from) imports \(to); Package.swift does not")
                    edges[from, default: []].insert(to)
                }
            }
        }
        #expect(!edges.isEmpty, "no `A ← B` lines found under the diagram")
        let drawn = boxes.union(edges.keys).union(edges.values.flatMap { $0 })
        func reaches(_ from: String, _ to: String) -> Bool {
            var seen: Set<String> = []
            var queue = [from]
            while let next = queue.popLast() {
                if next == to { return true }
                if seen.insert(next).inserted { queue += edges[next] ?? [] }
            }
            return false
        }
        for module in drawn.sorted() where module != "ProviderCore" {
            for dependency in (targets[module] ?? []).sorted() where drawn.contains(dependency) {
                #expect(reaches(module, dependency), "\(module) imports \(dependency): the diagram's lines do not say so")
            }
        }
    }

    /// Declarations of functions, properties, cases and types in the sources of the package, and
    /// the names of its Swift files.
    static func declaredNames() throws -> (functions: Set<String>, types: Set<String>, files: Set<String>) {
        var text = ""
        var files: Set<String> = []
        for folder in ["Sources", "Adapters", "Tests", "Servers/media-server/Sources", "Plugins", "Backends", "Benchmarks"] {
            let base = root.appendingPathComponent(folder)
            guard let walk = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { continue }
            for case let url as URL in walk {
                if url.lastPathComponent.hasPrefix(".") {
                    walk.skipDescendants()
                    continue
                }
                if url.pathExtension == "swift" {
                    files.insert(url.lastPathComponent)
                    text += (try? String(contentsOf: url, encoding: .utf8)) ?? ""
                }
            }
        }
        let functions = Set(text.matches(of: /\b(?:func|case|var|let)\s+([A-Za-z_][A-Za-z0-9_]*)/).map { String($0.1) })
        let types = Set(
            text.matches(of: /\b(?:class|struct|enum|protocol|actor|typealias|extension)\s+([A-Za-z_][A-Za-z0-9_]*)/).map { String($0.1) })
        return (functions, types, files)
    }

    /// Names the guides' Swift uses that come from Swift, Foundation, Swift Testing or
    /// PackageDescription, and the made-up ones of examples (`blockingLookup` in section 5 of
    /// Docs/WritingAnAdapter.md stands for a backend's own lookup).
    static let outsideNames: Set<String> = [
        "Self", "URL", "Data", "String", "Int", "Int64", "Bool", "FileManager", "Task", "Testing", "Suite", "Test", "Package",
        "PackageDescription", "init", "map",
        "max", "min", "joined", "throws", "removeItem", "deletingLastPathComponent", "lexicographicallyPrecedes",
        "library", "product", "testTarget", "target", "executableTarget", "macOS", "success", "failure", "package",
        "blockingLookup", "sort", "append", "contains", "fileExists", "appendingPathComponent", "write", "expect",
    ]

    /// Calls, function names and type names in the fenced Swift of the guides, the calls they
    /// name in backticks (`item(for:)`) and the Swift files they name exist in the sources: a
    /// rename that leaves a guide quoting the old name fails here.
    @Test func theCodeTheGuidesQuoteExists() throws {
        let (functions, types, files) = try Self.declaredNames()
        let modules = Set(try Self.targets().keys)
        let docs =
            try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Docs").path)
            .filter { $0.hasSuffix(".md") }.map { "Docs/" + $0 }
            + FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Docs/Adapters").path)
            .filter { $0.hasSuffix(".md") }.map { "Docs/Adapters/" + $0 } + ["README.md"]
        var fences = 0
        // C, SQL and shell functions the prose names in backticks.
        let prose: Set<String> = ["poll", "coalesce", "lseek", "fcntl", "openat", "max", "init", "throws"]
        for name in docs {
            let text = try Self.read(name)
            for fence in text.matches(of: /```swift\n((?:.|\n)*?)```/) {
                fences += 1
                var code = String(fence.1)
                code.replace(/\/\/[^\n]*/, with: "")
                code.replace(/"(?:[^"\\\n]|\\.)*"/, with: "\"\"")
                let declaredHere = Set(code.matches(of: /\b(?:class|struct|enum|protocol|actor|typealias)\s+(\w+)/).map { String($0.1) })
                for type in code.matches(of: /\b([A-Z][A-Za-z0-9]+)\b/).map({ String($0.1) }) {
                    if types.contains(type) || functions.contains(type) || declaredHere.contains(type) || modules.contains(type)
                        || Self.outsideNames.contains(type)
                    {
                        continue
                    }
                    Issue.record("\(name) quotes the type \(type), which the sources do not declare")
                }
                for call in code.matches(of: /[.\s(]([a-z][A-Za-z0-9]*)\(/).map({ String($0.1) }) {
                    if functions.contains(call) || Self.outsideNames.contains(call) { continue }
                    Issue.record("\(name) quotes a call of \(call)(…), which the sources do not declare")
                }
            }
            // Swift files the page names exist (`NAME…` stands for an adapter's own).
            for file in text.matches(of: /([A-Za-z0-9_+-]+\.swift)\b/).map({ String($0.1) }) {
                if files.contains(file) || file == "Package.swift" || file == "GRDB.swift" || file.hasPrefix("NAME") { continue }
                Issue.record("\(name) names the file \(file), which is nowhere in the sources")
            }
            for call in text.matches(of: /`([a-z][A-Za-z0-9]*)\(/).map({ String($0.1) }) {
                if functions.contains(call) || prose.contains(call) { continue }
                Issue.record("\(name) names `\(call)(…)`, which the sources do not declare")
            }
        }
        #expect(fences >= 10)
    }

    /// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_` kept, spaces
    /// made `-`, everything else dropped.
    static func anchor(_ heading: Substring) -> String {
        var slug = ""
        for character in heading.lowercased() {
            if character == " " {
                slug.append("-")
            } else if character.isLetter || character.isNumber || character == "-" || character == "_" {
                slug.append(character)
            }
        }
        return slug
    }

    /// Every relative link of README.md and Docs/ names a file that exists and, with `#`, a
    /// heading of that page: a section moved to another page leaves no link behind.
    @Test func linksBetweenThePagesResolve() throws {
        let pages =
            try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Docs").path)
            .filter { $0.hasSuffix(".md") }.map { "Docs/" + $0 }
            + FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Docs/Adapters").path)
            .filter { $0.hasSuffix(".md") }.map { "Docs/Adapters/" + $0 } + ["README.md"]
        var headings: [String: Set<String>] = [:]
        var texts: [String: String] = [:]
        for page in pages {
            var text = try Self.read(page)
            text.replace(/```(?:.|\n)*?```/, with: "")
            texts[page] = text
            headings[page] = Set(text.matches(of: /(?m)^#+ (.*)$/).map { Self.anchor($0.1) })
        }
        var links = 0
        for page in pages {
            let folder = URL(fileURLWithPath: page).deletingLastPathComponent().relativePath
            for link in texts[page, default: ""].matches(of: /\]\(([^)#\s]*)(?:#([^)\s]+))?\)/) {
                let target = String(link.1)
                if target.hasPrefix("http") || target.hasPrefix("mailto:") { continue }
                links += 1
                let path =
                    target.isEmpty
                    ? page : URL(fileURLWithPath: folder == "." ? target : folder + "/" + target).standardized.relativePath
                let relative = path.hasPrefix(Self.root.path + "/") ? String(path.dropFirst(Self.root.path.count + 1)) : path
                guard FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(relative).path) else {
                    Issue.record("\(page) links to \(target), which does not exist")
                    continue
                }
                if let anchor = link.2, relative.hasSuffix(".md") {
                    #expect(
                        headings[relative]?.contains(String(anchor)) == true, "\(page) links to \(relative)#\(anchor): no such heading")
                }
            }
        }
        #expect(links > 50)
    }

    /// README.md's "Module layout" names every library product of Package.swift.
    @Test func readmeNamesEveryLibraryProduct() throws {
        let manifest = try Self.read("Package.swift")
        let readme = try #require(Self.section(titled: "Module layout", in: try Self.read("README.md")))
        var products = 0
        for product in manifest.matches(of: /\.library\(name: "([^"]+)"/) {
            products += 1
            #expect(readme.contains("`\(product.1)`"), "README.md's Module layout does not name the library \(product.1)")
        }
        #expect(products >= 10)
    }
}
