import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct DomainAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a domain: a store whose items appear in a replica folder.",
        discussion: """
            Backend options follow --backend as --NAME VALUE (or --NAME=VALUE).

            Replica modes (--mode):
              dataless           (the default) Every file is under its real name and is fetched \
            when any program reads, writes or runs it, while 'fileproviderctl serve' runs (without \
            it the replica folder is empty; the files are kept in <home>/replicas/<name>): run \
            it from login on with the systemd user unit, 'systemctl --user enable --now \
            fileproviderctl-serve'. Without --mode, where neither fanotify nor FUSE can work here \
            (no root, and no fuse3 or no usable /dev/fuse), the domain is added in \
            placeholder-files mode instead, and a line says why and how to get dataless files; \
            an explicit --mode dataless is refused there, with the reason. How programs reach \
            the files (--on-access):
                fanotify         fanotify pre-content events: complete files at native speed; needs \
            root (CAP_SYS_ADMIN), Linux 6.14 or later and a state folder on ext4, xfs, btrfs or \
            bcachefs. Programs that map holes before they read (SEEK_DATA/SEEK_HOLE, FIEMAP; not \
            tar, which is given whole files) skip what is not downloaded and get zeros: \
            materialize first.
                fuse             a FUSE mount (libfuse 3, fusermount3): any user, any kernel with \
            FUSE, no holes; a read the kernel has not cached goes through serve.
                auto             (the default) fanotify where it can work, else fuse; 'domain add' \
            and 'domain show' say which and why.

              placeholder-files  A file that is not downloaded is a small <name>.placeholder file \
            beside its name until 'fileproviderctl materialize' downloads it; works anywhere, \
            without root and without 'serve': for scripts and machines that run no 'serve'. The \
            mode of --adopt-replica.

            \(AdapterList.descriptors.map(Self.describe).joined(separator: "\n\n"))

            Passwords (sftp, webdav): never stored in the database. They are looked up, in this \
            order, in the variable named by --password-env, the systemd credential \
            fileprovider.NAME ($CREDENTIALS_DIRECTORY), the Secret Service (GNOME Keyring, \
            KWallet) and netrc (--netrc-file, else ~/.netrc; machine = the host). When the store \
            refuses the credentials, no --password-env is given and standard input is a \
            terminal, 'domain add' asks for the password (not echoed) and stores it in the \
            Secret Service; 'domain set NAME --password' changes it and 'domain remove' deletes it.

            With --sync the new domain's first sync runs right away, in this process and on the \
            connection that checked the store, as 'fileproviderctl sync NAME' would run it (the \
            store's items recorded, the replica's first folders populated). When that sync fails \
            the domain stays added: 'fileproviderctl sync NAME' tries again.

            Examples:
              fileproviderctl domain add photos --backend local --root ~/Pictures
              fileproviderctl domain add music --backend local --root ~/Music --sync
              fileproviderctl domain add backup --mode placeholder-files --backend sftp --host nas --root /srv
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: "The domain's name: up to 64 characters; no '/', ':', spaces or control characters; not starting with '.' or '-'.")
    var name: String

    @Option(
        help: ArgumentHelp(
            "The backend kind: \(AdapterList.descriptors.map(\.kind).joined(separator: ", ")), or an external backend program's name (see 'fileproviderctl backend list').",
            valueName: "kind"),
        completion: .backendKinds)
    var backend: String

    @Option(help: ArgumentHelp("The replica folder (default: <home>/domains/<name>); must be empty or new.", valueName: "dir"))
    var replica: String?

    @Option(
        help: ArgumentHelp(
            "A name pattern (*, ? and [...] wildcards) never uploaded from the replica, besides the default list of editors' and git's swap and lock files; !PATTERN takes PATTERN off that list; repeatable.",
            valueName: "pattern"))
    var ignore: [String] = []

    @Option(
        help: ArgumentHelp(
            "How files that are not downloaded appear: dataless (the default; placeholder-files where neither fanotify nor FUSE works here, saying why) or placeholder-files; see below.",
            valueName: "mode"))
    var mode: ReplicaMode?

    @Option(
        help: ArgumentHelp(
            "How programs reach a dataless domain's files: auto (the default: fanotify where it can work, else fuse), fanotify or fuse; without --mode it means dataless; see below.",
            valueName: "mechanism"))
    var onAccess: OnAccessChoice?

    @Option(
        help: ArgumentHelp(
            "The most bytes of downloaded contents to keep, as 20G or 512M (binary units: 1G = 1024^3 bytes); automatic eviction drops the least recently used files beyond it. Default: no budget of its own.",
            valueName: "size"))
    var cacheBudget: String?

    @Option(
        help: ArgumentHelp(
            "How a dataless domain fetches a file a program reads: progressive (the default: only the chunks a read needs, with read-ahead; the whole file once every byte was read) or full (the whole file on its first access).",
            valueName: "hydration"))
    var hydration: Hydration?

    @Flag(
        help:
            "Take over a replica folder that holds files already (kept by 'domain remove --keep-replica'): files that are the store's are recorded as downloaded; placeholder-files mode only (the mode without --mode)."
    )
    var adoptReplica = false

    @Flag(
        help:
            "Sync the new domain right away, in this process (as 'fileproviderctl sync NAME' does); the domain stays added when that sync fails."
    )
    var sync = false

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Backend options (--root DIR, ...).", visibility: .hidden))
    var backendOptions: [String] = []

    static func describe(_ descriptor: BackendDescriptor) -> String {
        var lines = ["Backend '\(descriptor.kind)': \(descriptor.summary)"]
        for option in descriptor.options {
            var text = "  --\(option.name) <\(option.type.rawValue)>  \(option.help)"
            if option.isRequired { text += " (required)" }
            if let value = option.defaultValue { text += " (default: \(value))" }
            lines.append(text)
        }
        return lines.joined(separator: "\n")
    }

    /// The options `domain add` itself takes (and the ones every command takes), each with
    /// whether a value follows it. Any other `--NAME` is a backend option.
    static let ownOptions: [String: Bool] = [
        "backend": true, "replica": true, "ignore": true, "mode": true, "on-access": true, "cache-budget": true, "hydration": true,
        "home": true, "log-level": true, "log-file": true,
        "adopt-replica": false, "sync": false, "progress": false, "no-progress": false, "json": false, "verbose": false,
        "quiet": false, "help": false,
    ]

    /// `arguments` (a whole command line, after ``GlobalArguments/reorder(_:root:)``) with the
    /// backend options of `domain add` moved after everything else, so they parse wherever the
    /// domain's name stands: `domain add --backend local --root /x foo` is read as
    /// `domain add --backend local foo --root /x`. Other command lines are returned as they are.
    ///
    /// A backend option is a `--NAME` that is not one of ``ownOptions``; the word after it is
    /// its value unless it starts with `--`, or unless the option is a boolean option of the
    /// built-in backend named by `--backend` and the word is not `true`, `false`, `yes`, `no`,
    /// `on`, `off`, `1` or `0`. Arguments after `--` stay where they are.
    ///
    /// - Throws: `invalidArgument` when backend options are given and no name (swift-argument-
    ///   parser would call the first one an unknown option).
    static func placingBackendOptions(_ arguments: [String]) throws(FileProviderError) -> [String] {
        guard arguments.count > 2, arguments[0] == "domain", arguments[1] == "add" else { return arguments }
        var kind: String?
        for (index, argument) in arguments.enumerated() {
            if argument == "--" { break }
            if argument == "--backend", index + 1 < arguments.count { kind = arguments[index + 1] }
            if argument.hasPrefix("--backend=") { kind = String(argument.dropFirst("--backend=".count)) }
        }
        let booleans = Set(
            AdapterList.descriptors.first { $0.kind == kind }?.options.filter { $0.type == .boolean }.map(\.name) ?? [])
        let literals: Set<String> = ["true", "false", "yes", "no", "on", "off", "1", "0"]
        var kept = Array(arguments[..<2])
        var moved: [String] = []
        var named = false
        var index = 2
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { break }
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                kept.append(argument)
                if !argument.hasPrefix("-") { named = true }
                continue
            }
            let name = String(argument.dropFirst(2).prefix { $0 != "=" })
            let inline = argument.contains("=")
            if let takesValue = ownOptions[name] {
                kept.append(argument)
                if takesValue, !inline, index < arguments.count {
                    kept.append(arguments[index])
                    index += 1
                }
                continue
            }
            moved.append(argument)
            if !inline, index < arguments.count, !arguments[index].hasPrefix("--"),
                !booleans.contains(name) || literals.contains(arguments[index].lowercased())
            {
                moved.append(arguments[index])
                index += 1
            }
        }
        let help = arguments.contains("--help") || arguments.contains("-h")
        if !moved.isEmpty, !named, index == arguments.count, !help {
            throw FileProviderError(
                .invalidArgument,
                "the domain's name is missing: fileproviderctl domain add NAME --backend KIND [backend options]")
        }
        return kept + moved + arguments[index...]
    }

    /// A backend option that a built-in backend of `kind` does not take, and that is a typo of
    /// one of `domain add`'s own options or of the backend's (`--replcia`, `--rooot`), is
    /// refused with the option meant; other unknown names are left to the engine, which lists
    /// the backend's options.
    /// - Throws: `invalidArgument` naming the nearest option.
    static func checkNames(of options: [String: String], kind: String) throws(FileProviderError) {
        guard let descriptor = AdapterList.descriptors.first(where: { $0.kind == kind }) else { return }
        let known = descriptor.options.map(\.name)
        for name in options.keys.sorted() where !known.contains(name) {
            if let meant = CommandSuggestion.closest(to: name, among: Array(ownOptions.keys).sorted() + known) {
                throw FileProviderError(.invalidArgument, "unknown option '--\(name)'; did you mean '--\(meant)'?")
            }
        }
    }

    /// Parses `--name value` and `--name=value` pairs.
    static func parse(_ arguments: [String]) throws(FileProviderError) -> [String: String] {
        var values: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw FileProviderError(.invalidArgument, "unexpected argument '\(argument)'; backend options look like --root DIR")
            }
            let body = argument.dropFirst(2)
            if let equals = body.firstIndex(of: "=") {
                values[String(body[..<equals])] = String(body[body.index(after: equals)...])
            } else if index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") {
                values[String(body)] = arguments[index + 1]
                index += 1
            } else {
                values[String(body)] = "true"
            }
            index += 1
        }
        return values
    }

    func run() async throws {
        let manager = try global.manager()
        try await AdapterList.describeExternal(backend)
        // The engine makes path options absolute (`~`, relative to this directory).
        let options = try Self.parse(backendOptions)
        try Self.checkNames(of: options, kind: backend)
        let budget = try cacheBudget.map { text throws(FileProviderError) in try ByteCount.parseOrNone(text) } ?? nil
        let replicaPath = replica.map { URL(fileURLWithPath: ($0 as NSString).expandingTildeInPath).standardizedFileURL.path }
        if onAccess != nil && mode == .placeholderFiles {
            throw FileProviderError(
                .invalidArgument,
                "--on-access chooses how programs reach a dataless domain's files: leave out --mode placeholder-files (--mode dataless is the default), or leave out --on-access"
            )
        }
        if adoptReplica && (mode == .dataless || onAccess != nil) {
            throw FileProviderError(
                .invalidArgument,
                "--adopt-replica works in placeholder-files mode only; add the domain with it, then 'fileproviderctl domain convert \(name) --mode dataless'"
            )
        }
        let (mode, modeReason) = try await chooseMode(manager)
        let add = { () async throws(FileProviderError) -> (DomainRecord, AdoptionSummary?) in
            if adoptReplica {
                return try await manager.addDomainAdoptingReplica(
                    name: name, kind: backend, options: options, replicaPath: replicaPath, ignorePatterns: ignore,
                    cacheBudget: budget, hydration: hydration, modeReason: modeReason)
            }
            let record = try await manager.addDomain(
                name: name, kind: backend, options: options, replicaPath: replicaPath, ignorePatterns: ignore, mode: mode,
                cacheBudget: budget, hydration: hydration, onAccess: (onAccess ?? .auto).mechanism, modeReason: modeReason,
                keepsConnection: sync)
            return (record, nil)
        }
        let (record, adopted, storedPassword) = try await addAskingForPassword(options: options, add)
        let synced = sync ? await firstSync(manager) : nil
        // After a sync the record has its date and outcome.
        let current = synced == nil ? record : (try? manager.domain(named: name)) ?? record
        var shown = try DomainJSON(current, summary: nil, manager: manager)
        shown.adopted = adopted
        if case .success(let report) = synced { shown.sync = report }
        await manager.close()
        if let storedPassword {
            // On standard error in JSON mode: standard output holds the JSON alone.
            let line =
                "stored the password in \(storedPassword.whereStored); 'fileproviderctl domain set \(name) --password' changes it, 'fileproviderctl domain remove \(name)' deletes it"
            if output.json { FileHandle.standardError.write(Data((line + "\n").utf8)) } else { print(line) }
        }
        if output.json {
            try Output.json(shown)
        } else if let adopted {
            print("added domain '\(record.name)' (\(record.backendKind)); replica: \(record.replicaPath)")
            var line =
                "took over \(adopted.files) file\(adopted.files == 1 ? "" : "s") (\(Output.bytes(adopted.bytes))) and \(adopted.folders) folder\(adopted.folders == 1 ? "" : "s") already there"
            if adopted.differing > 0 {
                line +=
                    "; \(adopted.differing) file\(adopted.differing == 1 ? " differs" : "s differ") from the store's: the first sync keeps both (yours under a new name)"
            }
            print(line)
        } else if let backing = shown.backing {
            print(
                "added domain '\(record.name)' (\(record.backendKind), \(shown.mode)); replica: \(record.replicaPath); files kept in: \(backing)"
            )
            print("on access: \(record.onAccess.rawValue): \(record.onAccessReason ?? "")")
            if record.onAccess == .fanotify { print(Self.datalessLimit(record.name)) }
            print(Self.serveNeeded(asRoot: geteuid() == 0))
        } else {
            print("added domain '\(record.name)' (\(record.backendKind)); replica: \(record.replicaPath)")
            if self.mode == nil && !adoptReplica {
                print(
                    "placeholder-files mode, as \(modeReason); once one of them works, 'fileproviderctl domain convert \(record.name) --mode dataless' makes its files dataless"
                )
            }
        }
        if !output.json && synced == nil { print("next: fileproviderctl sync \(record.name)") }
        if let synced { try finish(synced) }
    }

    /// Whether the first sync (`--sync`) ran to its end, and how it ended: the report, or the
    /// error (the domain stays added either way).
    typealias FirstSync = Result<SyncReport, FileProviderError>

    /// Runs the new domain's first sync with the backend `domain add` connected
    /// (``ProviderManager/addDomain(name:kind:options:replicaPath:ignorePatterns:mode:cacheBudget:hydration:onAccess:modeReason:keepsConnection:)``),
    /// drawing progress as `sync` does.
    private func firstSync(_ manager: ProviderManager) async -> FirstSync {
        let bar = ProgressBar(label: name, options: progress)
        defer { bar.finish() }
        do {
            let controller = try await manager.controller(for: name)
            return .success(
                try await controller.sync(
                    events: SyncCommand.events(of: name, drawingOn: bar), upload: true,
                    populationBudget: DomainController.defaultPopulationBudget, followChanges: false))
        } catch {
            return .failure(FileProviderError.wrap(error))
        }
    }

    /// Says how the first sync (`--sync`) ended, after the lines about the domain, and throws
    /// what makes the exit status say it: nothing for a full sync; ``CommandPartial`` (exit 3)
    /// after the line that counts what was left; ``CommandFailure`` (exit 1) when the store
    /// stopped answering or the sync failed; ``CommandInterrupted`` after SIGINT or SIGTERM.
    private func finish(_ synced: FirstSync) throws {
        switch synced {
        case .success(let report):
            if !output.json { SyncCommand.show(report) }
            if report.unreachable != nil { throw CommandFailure() }
            try SyncCommand.endIfPartial([report])
        case .failure(let error):
            let again = "the domain is added; 'fileproviderctl sync \(name)' syncs it"
            if error.code == .cancelled && Interruption.shared.signal != nil {
                FileHandle.standardError.write(
                    Data("interrupted: \(name): the first sync stopped before it finished; \(again)\n".utf8))
                throw CommandInterrupted()
            }
            throw CommandFailure(message: "\(name): the first sync failed: \(error.message); \(again)")
        }
    }

    /// The mode of the new domain and why (``DomainJSON/modeReason``): the `--mode` given;
    /// placeholder-files with `--adopt-replica`; dataless with `--on-access` (whose mechanism
    /// is then checked as asked); else ``ProviderManager/defaultMode(forDomainNamed:)``:
    /// dataless where fanotify or FUSE works, else placeholder-files with the reason.
    /// - Throws: `invalidArgument` for an invalid domain name.
    private func chooseMode(_ manager: ProviderManager) async throws(FileProviderError) -> (ReplicaMode, String) {
        if let mode { return (mode, "asked for (--mode \(mode.rawValue))") }
        if adoptReplica { return (.placeholderFiles, "--adopt-replica (placeholder-files mode only)") }
        if onAccess != nil { return (.dataless, ProviderManager.defaultModeReason) }
        return try await manager.defaultMode(forDomainNamed: name)
    }

    /// The line that says a dataless domain's replica shows files only while `serve` runs, and
    /// how to run it: as an ordinary user, with the systemd user unit `make install` installs;
    /// as root (fanotify), with the system unit of Docs/Install.md.
    static func serveNeeded(asRoot: Bool) -> String {
        asRoot
            ? "serve must run (as root) for the replica to show files: 'fileproviderctl serve', or from boot on the system unit ('serve' as a system service in Docs/Install.md): 'systemctl enable --now fileproviderctl-serve'"
            : "serve must run for the replica to show files: 'fileproviderctl serve', or from login on the systemd user unit that 'make install' installs: 'systemctl --user enable --now fileproviderctl-serve'"
    }

    /// Runs `add`; when the store refuses the credentials of a backend that takes a password,
    /// none was named with `--password-env` and standard input is a terminal, asks for the
    /// password (without echo), stores it in the Secret Service and runs `add` again (three
    /// tries, as ssh). A password that was never accepted is deleted again. Returns what `add`
    /// returned, and where the password went when one was stored.
    ///
    /// - Throws: what `add` throws; the refusal, with what to do instead, when the Secret
    ///   Service cannot keep a password here; `cancelled` when the prompt is interrupted.
    private func addAskingForPassword(
        options: [String: String], _ add: () async throws(FileProviderError) -> (DomainRecord, AdoptionSummary?)
    ) async throws(FileProviderError) -> (DomainRecord, AdoptionSummary?, DomainPassword?) {
        var stored: DomainPassword?
        var tries = 0
        while true {
            do {
                let (record, adopted) = try await add()
                return (record, adopted, stored)
            } catch {
                guard error.code == .notAuthenticated, options["password-env"] == nil, PasswordPrompt.isTerminal,
                    !error.message.contains("named by --passphrase-env is not set"),
                    let password = DomainPassword(domain: name, kind: backend, options: options), tries < 3
                else {
                    if stored != nil { _ = try? await DomainPassword.delete(name) }
                    throw error
                }
                if tries == 0, let reason = await DomainPassword.unavailableReason(name) {
                    throw FileProviderError(
                        error.code,
                        "\(error.message)\nno password can be asked for and kept here: the Secret Service cannot be used (\(reason)); \(DomainPassword.instead(name))"
                    )
                }
                if tries > 0 { FileHandle.standardError.write(Data("the password was refused; try again\n".utf8)) }
                tries += 1
                do {
                    try await password.store(try await PasswordPrompt.read(password.prompt))
                    stored = password
                } catch {
                    if stored != nil { _ = try? await DomainPassword.delete(name) }
                    throw error
                }
            }
        }
    }

    /// The limit of the dataless mode that `domain add --mode dataless` states: programs that
    /// map holes read zeros without an error.
    static func datalessLimit(_ name: String) -> String {
        "limit: programs that map holes before reading (SEEK_DATA/SEEK_HOLE, FIEMAP; not tar, which is given whole files) skip what is not downloaded and get zeros instead of its bytes; run 'fileproviderctl materialize -R \(name):/' before such a backup"
    }
}

extension ReplicaMode: ExpressibleByArgument {}

/// What `domain add --on-access` takes: a mechanism, or `auto` (fanotify where it can work,
/// else FUSE).
enum OnAccessChoice: String, ExpressibleByArgument, CaseIterable {
    case auto, fanotify, fuse

    /// The mechanism asked for; `nil` for `auto`.
    var mechanism: OnAccessMechanism? {
        switch self {
        case .auto: nil
        case .fanotify: .fanotify
        case .fuse: .fuse
        }
    }
}
