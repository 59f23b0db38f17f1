import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderSystem

struct DomainSetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Change a domain's settings and backend options.",
        discussion: """
            --cache-budget SIZE: the most bytes of downloaded contents the domain keeps (its \
            materialized files and the parts present of partly downloaded ones). When it holds \
            more, automatic eviction drops the least recently used files that may go (not \
            pinned, not open, no local changes): 'fileproviderctl serve' within seconds, or \
            'fileproviderctl evict --to-budget' at once. SIZE is a number with K, M, G or T; the \
            units are binary (1K = 1024 bytes, 1G = 1024^3 bytes); 'none' removes the budget.

            --hydration full|progressive: how a dataless domain fetches a file a program reads: \
            the whole file on the first access, or only the parts reads need (with read-ahead). \
            Kept but unused in placeholder-files mode.

            --ignore PATTERN (repeatable) replaces the domain's ignore patterns; --no-ignore \
            removes them.

            Backend options follow as with 'domain add': --NAME VALUE or --NAME=VALUE (a flag \
            alone means true); --unset NAME puts one back to its default. They are checked as \
            'domain add' checks them, and the store must be reachable with them, else nothing \
            is changed.

            --password (sftp, webdav): asks for the domain's password (not echoed; one line of \
            standard input when it is not a terminal) and stores it in the Secret Service (GNOME \
            Keyring, KWallet), replacing the one stored; the store must accept it, else the one \
            stored before is kept. 'domain remove' deletes it.

            A running serve applies the budget and hydration without a restart; it takes \
            ignore patterns and backend options when it starts again. The replica folder and \
            the mode are not settings: see 'domain convert', and 'domain remove --keep-replica' \
            with 'domain add --adopt-replica'.

            Examples:
              fileproviderctl domain set photos --cache-budget 20G
              fileproviderctl domain set work --connections 8 --unset identity
              fileproviderctl domain set nas --password
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    @Option(help: ArgumentHelp("The most bytes of downloaded contents to keep (20G, 512M; binary units), or none.", valueName: "size"))
    var cacheBudget: String?

    @Option(help: ArgumentHelp("How a dataless domain fetches files on access: full or progressive.", valueName: "hydration"))
    var hydration: Hydration?

    @Option(
        help: ArgumentHelp(
            "A name pattern (* and ? wildcards) never uploaded; repeatable; replaces the domain's patterns.", valueName: "pattern"))
    var ignore: [String] = []

    @Flag(help: "Remove the domain's ignore patterns.")
    var noIgnore = false

    @Option(help: ArgumentHelp("A backend option to put back to its default (or leave unset); repeatable.", valueName: "name"))
    var unset: [String] = []

    @Flag(
        help:
            "Ask for the domain's password (sftp, webdav) and store it in the Secret Service; from standard input when it is not a terminal."
    )
    var password = false

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Backend options (--connections 8, ...).", visibility: .hidden))
    var backendOptions: [String] = []

    func validate() throws {
        if cacheBudget == nil && hydration == nil && ignore.isEmpty && !noIgnore && unset.isEmpty && backendOptions.isEmpty
            && !password
        {
            throw ValidationError(
                "nothing to change: give --cache-budget SIZE|none, --hydration full|progressive, --ignore PATTERN, --no-ignore, --unset NAME, --password or backend options (--NAME VALUE)"
            )
        }
        if noIgnore && !ignore.isEmpty { throw ValidationError("--ignore and --no-ignore do not go together") }
    }

    func run() async throws {
        let manager = try global.manager()
        let before = try manager.domain(named: name)
        let budget = try cacheBudget.map { text throws(FileProviderError) in try ByteCount.parseOrNone(text) }
        let values = try DomainAddCommand.parse(backendOptions)
        let changesBackend = !values.isEmpty || !unset.isEmpty
        let removing = unset.map { $0.hasPrefix("--") ? String($0.dropFirst(2)) : $0 }
        var stored: DomainPassword?
        if password {
            stored = try await setPassword(before, values: values, removing: removing, manager: manager)
        } else if changesBackend {
            try await manager.setBackendOptions(ofDomain: name, values, removing: removing)
        }
        if !ignore.isEmpty || noIgnore { try manager.setIgnorePatterns(ofDomain: name, ignore) }
        if let budget { try manager.setCacheBudget(ofDomain: name, budget) }
        if let hydration { try manager.setHydration(ofDomain: name, hydration) }
        let domain = try manager.domain(named: name)
        let shown = try DomainJSON(domain, summary: nil, manager: manager)
        let server = DomainLock.holder(home: manager.home, domain: name)
        await manager.close()
        if output.json {
            try Output.json(shown)
            return
        }
        var lines = [
            "\(domain.name): cache budget \(Output.budget(domain.cacheBudget)), \(Output.bytes(shown.cache.used)) used; hydration \(domain.hydration.rawValue)"
        ]
        if !ignore.isEmpty || noIgnore {
            lines.append("  ignore: \(domain.ignoreList.isEmpty ? "none" : domain.ignoreList.map(Output.text).joined(separator: " "))")
        }
        if changesBackend {
            for (key, value) in domain.options.sorted(by: { $0.key < $1.key }) where value != before.options[key] {
                lines.append("  --\(key) \(Output.text(value))")
            }
            for key in before.options.keys.sorted() where domain.options[key] == nil { lines.append("  --\(key) (unset)") }
        }
        if let stored { lines.append("  password stored in \(stored.whereStored)") }
        if let server, changesBackend || !ignore.isEmpty || noIgnore {
            lines.append("  serve (process \(server)) takes the new options and ignore patterns when it starts again")
        }
        print(lines.joined(separator: "\n"))
    }
}

extension DomainSetCommand {
    /// Asks for the password, stores it in the Secret Service and checks the store accepts it
    /// (with the backend options changed in the same command); when it does not, puts back the
    /// password stored before (or deletes the new one) and nothing is changed.
    ///
    /// - Throws: `invalidArgument` when the backend takes no password (or WebDAV has no
    ///   `--user`); `notAuthenticated` when the Secret Service cannot be used (with what to do
    ///   instead) or the store refuses the password; what the prompt throws.
    func setPassword(
        _ domain: DomainRecord, values: [String: String], removing: [String], manager: ProviderManager
    ) async throws(FileProviderError) -> DomainPassword {
        var options = domain.options.merging(values) { _, new in new }
        for name in removing { options[name] = nil }
        guard let password = DomainPassword(domain: name, kind: domain.backendKind, options: options) else {
            throw FileProviderError(
                .invalidArgument,
                DomainPassword.takesPassword(domain.backendKind)
                    ? "domain '\(name)' has no --user: give one (--user NAME) with --password"
                    : "the \(domain.backendKind) backend of domain '\(name)' takes no password")
        }
        if let reason = await DomainPassword.unavailableReason(name) {
            throw FileProviderError(
                .notAuthenticated, "the Secret Service cannot be used (\(reason)); \(DomainPassword.instead(name))")
        }
        let previous = try await password.stored()
        let typed = try await PasswordPrompt.read(password.prompt)
        try await password.store(typed)
        do {
            try await manager.setBackendOptions(ofDomain: name, values, removing: removing)
        } catch {
            if let previous {
                try? await password.store(previous)
            } else {
                _ = try? await DomainPassword.delete(name)
            }
            throw FileProviderError(
                error.code, "\(error.message)\nthe new password was not kept\(previous == nil ? "" : "; the one stored before is back")")
        }
        return password
    }
}

extension Hydration: ExpressibleByArgument {}
