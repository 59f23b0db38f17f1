import ArgumentParser

/// A mistyped command's name gets a "did you mean" (`fileproviderctl sycn`, `fileproviderctl
/// domain ad`), as git's does, instead of swift-argument-parser's `Unexpected argument`.
enum CommandSuggestion {
    /// The error for the first word of `arguments` (after ``GlobalArguments/reorder(_:root:)``)
    /// that stands where a subcommand's name must be and names none, or `nil`: `unknown command
    /// 'sycn'; did you mean 'sync'?`, or the list of commands when none is close.
    static func unknownCommand(in arguments: [String], root: any ParsableCommand.Type) -> String? {
        var command = root
        var path: [String] = []
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            // The options every command takes, moved before the word by GlobalArguments when no
            // command was recognized (`--home DIR sycn`).
            if GlobalArguments.valued.contains(word) {
                index += 1
                continue
            }
            let combined =
                word.count > 2 && word.hasPrefix("-") && !word.hasPrefix("--") && word.dropFirst().allSatisfy { $0 == "v" || $0 == "q" }
            if combined || GlobalArguments.flags.contains(word) || GlobalArguments.valued.contains(where: { word.hasPrefix($0 + "=") }) {
                continue
            }
            if let next = GlobalArguments.subcommand(named: word, of: command) {
                path.append(word)
                command = next
                continue
            }
            let configuration = command.configuration
            guard !word.hasPrefix("-"), word != "help", !configuration.subcommands.isEmpty,
                configuration.defaultSubcommand == nil
            else { return nil }
            let names = configuration.subcommands.map { $0.configuration.commandName ?? $0._commandName }
            let typed = (path + [word]).joined(separator: " ")
            let prefix = ([root.configuration.commandName ?? "fileproviderctl"] + path).joined(separator: " ")
            if let best = closest(to: word, among: names) {
                return "unknown command '\(typed)'; did you mean '\((path + [best]).joined(separator: " "))'?"
            }
            return "unknown command '\(typed)'; the commands are \(names.joined(separator: ", ")) (see '\(prefix) --help')"
        }
        return nil
    }

    /// The name nearest to `word`: within an edit distance of 2 (1 for names of up to 4
    /// characters), or that `word` begins; `nil` when there is none.
    static func closest(to word: String, among names: [String]) -> String? {
        let lowered = word.lowercased()
        let scored = names.map { name in (name, distance(lowered, name)) }
        if let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= (best.0.count <= 4 ? 1 : 2) {
            return best.0
        }
        if lowered.count >= 2, let started = names.first(where: { $0.hasPrefix(lowered) }) { return started }
        return nil
    }

    /// The optimal string alignment distance: insertions, deletions, substitutions and swaps
    /// of two neighbouring characters (`sycn` is one from `sync`).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
