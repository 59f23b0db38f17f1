import ArgumentParser
import ExternalAdapter
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

/// Dynamic shell completion: the shell scripts (`--generate-completion-script bash|zsh|fish`,
/// installed by `make install`) run `fileproviderctl ---completion …` at each Tab, and these
/// answer from the metadata database, offline: domain names, and `DOMAIN:/path` one folder at a
/// time. The state folder is the one the command line names with `--home`, else
/// `$FILEPROVIDER_HOME`, else the default. Nothing is created: without a database there is
/// nothing to offer.
extension CompletionKind {
    /// Names of the configured domains.
    static var domainNames: CompletionKind {
        .custom { words, index, prefix in Completions.domainNames(words: words, index: index, prefix: prefix) }
    }

    /// `DOMAIN:/path` of items in the database, and local paths (a path inside a replica).
    static var itemPaths: CompletionKind {
        .custom { words, index, prefix in Completions.itemPaths(words: words, index: index, prefix: prefix) }
    }

    /// The backend kinds: the built-in ones, and the external backend programs found
    /// (``ExternalBackends/all(environment:)``, which starts none of them). Never file names.
    static var backendKinds: CompletionKind {
        .custom { _, _, prefix in Completions.backendKinds(prefix: prefix) }
    }
}

enum Completions {
    /// The completion script for `shell`, as swift-argument-parser writes it, with one change for
    /// bash: the script registers itself with `complete -o filenames` (for the paths it offers),
    /// and with it bash takes every candidate for a file name, so a backend kind that is also a
    /// folder of the current directory (`sftp`) was completed as `sftp/`. Where it offers backend
    /// kinds it turns that off (`compopt +o filenames`) for this completion.
    static func script(for shell: CompletionShell) -> String {
        let script = FileProviderCtl.completionScript(for: shell)
        guard shell == .bash else { return script }
        var lines: [Substring] = []
        for line in script.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.contains("---completion domain add -- --backend ") || line.contains("---completion backend test -- positional@0 ") {
                let indent = line.prefix { $0 == " " }
                lines.append("\(indent)compopt +o filenames 2>/dev/null")
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// The shell `arguments` ask a completion script for (`--generate-completion-script bash`,
    /// or `=bash`), when they are only that; else `nil`.
    static func scriptRequest(_ arguments: [String]) -> CompletionShell? {
        let option = "--generate-completion-script"
        var value: String?
        if arguments.count == 2, arguments[0] == option { value = arguments[1] }
        if arguments.count == 1, arguments[0].hasPrefix(option + "=") { value = String(arguments[0].dropFirst(option.count + 1)) }
        return value.flatMap(CompletionShell.init(rawValue:))
    }

    /// At most this many candidates are offered (a folder of a million items stays quick).
    static let limit = 2000

    /// The backend kinds that start with `prefix`, built-in ones first, each once.
    static func backendKinds(prefix: String) -> [String] {
        let builtIn = AdapterList.descriptors.map(\.kind)
        let external = ExternalBackends.all().map(\.kind).filter { !builtIn.contains($0) }
        return (builtIn + external).filter { $0.hasPrefix(prefix) }
    }

    static func domainNames(words: [String], index: Int, prefix: String) -> [String] {
        guard let store = openStore(words) else { return [] }
        let names = ((try? store.domains()) ?? []).map(\.name).filter { $0.hasPrefix(prefix) }.sorted()
        return names.map { escaped($0) }
    }

    static func itemPaths(words: [String], index: Int, prefix: String) -> [String] {
        // bash splits words at ':' (COMP_WORDBREAKS): `photos:/a` arrives as `photos`, `:`,
        // `/a`. The word is joined again, and the candidates lose what bash already has.
        let (word, before) = CompletionShell.requesting == .bash ? bashWord(words, index, prefix) : (prefix, "")
        var candidates: [String] = []
        if let colon = word.firstIndex(of: ":"), !word[..<colon].contains("/") {
            candidates = databasePaths(words, domain: String(word[..<colon]), path: String(word[word.index(after: colon)...]))
        } else {
            if !word.contains("/"), let store = openStore(words) {
                candidates += ((try? store.domains()) ?? []).map { $0.name + ":/" }.filter { $0.hasPrefix(word) }.sorted()
            }
            candidates += localPaths(word)
        }
        return candidates.compactMap { candidate in
            guard candidate.hasPrefix(before) else { return nil }
            return escaped(String(candidate.dropFirst(before.count)))
        }
    }

    /// Items directly inside the folder `path` names (up to its last `/`) whose names start
    /// with the rest: `DOMAIN:/folder/name`, with a `/` after folders.
    static func databasePaths(_ words: [String], domain: String, path: String) -> [String] {
        guard let store = openStore(words), let record = try? store.domain(named: domain), let id = record.id else { return [] }
        var relative = path
        while relative.hasPrefix("/") { relative.removeFirst() }
        let folder: String
        let namePrefix: String
        if let slash = relative.lastIndex(of: "/") {
            folder = String(relative[..<slash])
            namePrefix = String(relative[relative.index(after: slash)...])
        } else {
            folder = ""
            namePrefix = relative
        }
        guard let children = try? store.children(domainID: id, inFolderAt: folder) else { return [] }
        var result: [String] = []
        for child in children {
            let name = child.path.split(separator: "/").last.map(String.init) ?? child.path
            // A name from the store with a line break or another control character would
            // break the shell's list (one candidate a line) or its screen: not offered.
            guard name.hasPrefix(namePrefix), !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                continue
            }
            result.append("\(domain):/\(child.path)\(child.state == .folder ? "/" : "")")
            if result.count >= limit { break }
        }
        return result
    }

    /// Files and folders of the local folder `word` names, with a `/` after folders.
    static func localPaths(_ word: String) -> [String] {
        let folderPart: String
        let namePrefix: String
        if let slash = word.lastIndex(of: "/") {
            folderPart = String(word[...slash])
            namePrefix = String(word[word.index(after: slash)...])
        } else {
            folderPart = ""
            namePrefix = word
        }
        var folder = folderPart.isEmpty ? "." : folderPart
        if folder.hasPrefix("~") { folder = NSString(string: folder).expandingTildeInPath }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
        var result: [String] = []
        for name in names.sorted() where name.hasPrefix(namePrefix) && (namePrefix.hasPrefix(".") || !name.hasPrefix(".")) {
            var isFolder: ObjCBool = false
            let isDirectory = FileManager.default.fileExists(atPath: folder + "/" + name, isDirectory: &isFolder) && isFolder.boolValue
            result.append(folderPart + name + (isDirectory ? "/" : ""))
            if result.count >= limit { break }
        }
        return result
    }

    /// The whole word bash split at colons, and the part of it before bash's current word.
    static func bashWord(_ words: [String], _ index: Int, _ prefix: String) -> (word: String, before: String) {
        guard index > 0, index <= words.count else { return (prefix, "") }
        var tokens = Array(words[..<index])
        tokens.append(prefix)
        var position = tokens.count - 1
        var before = ""
        while position > 1, tokens[position] == ":" || tokens[position - 1] == ":" {
            before = tokens[position - 1] + before
            position -= 1
        }
        return (before + prefix, before)
    }

    /// zsh's completion list takes `:` as the start of a description.
    private static func escaped(_ candidate: String) -> String {
        CompletionShell.requesting == .zsh ? candidate.replacingOccurrences(of: ":", with: "\\:") : candidate
    }

    /// The metadata database of the state folder the command line names, if it exists.
    static func openStore(_ words: [String]) -> MetadataStore? {
        var home: String?
        for (position, word) in words.enumerated() {
            if word == "--home", position + 1 < words.count {
                home = words[position + 1]
            } else if word.hasPrefix("--home=") {
                home = String(word.dropFirst("--home=".count))
            }
        }
        if let value = home, value.hasPrefix("~") { home = NSString(string: value).expandingTildeInPath }
        let folder = home.map { URL(fileURLWithPath: $0) } ?? ProviderManager.defaultHome()
        let database = folder.appendingPathComponent("metadata.sqlite")
        guard FileManager.default.fileExists(atPath: database.path) else { return nil }
        return try? MetadataStore(url: database)
    }
}
