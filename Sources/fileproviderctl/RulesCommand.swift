import ArgumentParser
import ProviderStore

struct RulesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "List, add and remove access rules by program: which programs may fetch files that are not downloaded.",
        discussion: """
            In a dataless domain any program that reads a file not downloaded makes 'serve' \
            fetch it, content indexers too. An access rule names a program and says what its \
            reads do:

            fetch: fetch what the program reads (the default for every program).
            deny: refuse the program's reads of files not wholly downloaded at once with EPERM \
            ("Operation not permitted"); nothing is fetched, nothing waits. Downloaded files \
            read as usual.
            present-only: serve the bytes already downloaded; refuse (EPERM), fetching nothing, \
            where bytes are missing.

            A rule names a program by --program NAME (the executable's file name, or the \
            command name of /proc/PID/comm, cut to 15 bytes by the kernel), --executable PATH \
            (the full path of /proc/PID/exe) or --unit UNIT (a systemd unit or slice its cgroup \
            is in). A rule applies in one domain (--domain) or in all. A domain's own rules \
            decide before the global ones; within one scope an executable rule before a unit \
            rule before a program rule. A program whose process cannot be looked at (it \
            exited, or runs in another pid namespace) matches no rule: it fetches.

            Shipped defaults deny the content indexers (GNOME's localsearch and tracker, KDE's \
            Baloo); 'rules list' marks them. Add a rule of the same name (fetch, or for one \
            domain) to override one, or remove it. A running 'serve' picks up changes within a \
            second. Refusals are logged by serve, counted by 'status' and named by 'why PATH'.
            """,
        subcommands: [RulesListCommand.self, RulesAddCommand.self, RulesRemoveCommand.self]
    )
}

/// What names a rule's program, and its scope: shared by `rules add` and `rules remove`.
struct RuleTargetOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A program by name: its executable's file name or its command name.", valueName: "name"))
    var program: String?

    @Option(help: ArgumentHelp("A program by the full path of its executable.", valueName: "path"))
    var executable: String?

    @Option(help: ArgumentHelp("The programs of a systemd unit or slice (tracker-miner-fs-3.service).", valueName: "unit"))
    var unit: String?

    @Option(help: "The domain the rule applies in (default: all domains).", completion: .domainNames)
    var domain: String?

    func validate() throws {
        let given = [program, executable, unit].compactMap { $0 }
        if given.count != 1 {
            throw ValidationError("name the program with exactly one of --program NAME, --executable PATH or --unit UNIT")
        }
    }

    /// The kind and value given (after ``validate()``).
    var target: (kind: AccessRuleRecord.Kind, value: String) {
        if let executable { return (.executable, executable) }
        if let unit { return (.unit, unit) }
        return (.program, program ?? "")
    }
}
