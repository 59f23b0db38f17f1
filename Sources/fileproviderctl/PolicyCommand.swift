import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Show or set what stays downloaded: content policies per folder and per item.",
        usage: """
            fileproviderctl policy [--home <dir>] [--json] <path> ... [lazy|eager|evict-on-remote-update|online-only|inherit]
            """,
        discussion: """
            A content policy says what the engine keeps downloaded of an item (Apple's \
            NSFileProviderContentPolicy, the Windows Cloud Files API's pin states). An item \
            without a policy of its own follows the nearest folder above it that has one, items \
            added later too; with none, it is lazy.

            lazy: downloaded when read (or by 'materialize'), evictable by 'evict' and by \
            automatic eviction. The default. Apple: downloadLazily; cfapi: unspecified.

            eager: downloaded now, and whatever changes or is added below it later, by every \
            sync; never evicted ('evict' refuses it). What 'pin' sets. Apple: \
            downloadEagerlyAndKeepDownloaded; cfapi: pinned.

            evict-on-remote-update: downloaded when read; when the store has a new version of a \
            downloaded file, sync evicts it instead of downloading it again (a file with local \
            changes is left alone: its changes go up first). Apple: \
            downloadLazilyAndEvictOnRemoteUpdate.

            online-only: not kept: the downloaded files are evicted now, and again after each \
            use, once no program has them open and their changes are uploaded (a file that is \
            open or has changes not uploaded is refused now and evicted later). What 'unpin' \
            sets. cfapi: unpinned.

            inherit: removes the item's own policy: it follows its folder's again. cfapi: \
            inherit.

            Setting a policy on a folder (inherit too) removes the policies set on the items \
            below it: the whole subtree then follows the folder. To keep a different policy \
            below, set it after the folder's.

            Without a policy, prints each item's policy and where it is set. The last argument \
            is taken for the policy when it is one of the names above (write ./eager for a file \
            named so in the current folder).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(
        help: ArgumentHelp(
            "Items (DOMAIN:/path or a path inside a replica folder), then optionally the policy to set.", valueName: "path"),
        completion: .itemPaths)
    var arguments: [String]

    /// The policy to set, when the last argument names one: `.some(nil)` for `inherit`.
    var change: ContentPolicy?? {
        guard let last = arguments.last else { return nil }
        if last == "inherit" { return .some(nil) }
        return ContentPolicy(name: last).map { .some($0) }
    }

    var paths: [String] { change == nil ? arguments : Array(arguments.dropLast()) }

    func validate() throws {
        if paths.isEmpty { throw ValidationError("name at least one item (DOMAIN:/path) before the policy") }
    }

    func run() async throws {
        let manager = try global.manager()
        let groups = try ItemArguments.grouped(paths, manager)
        guard let change else {
            try await show(groups, manager)
            return
        }
        let bar = ProgressBar(label: "policy", options: progress)
        var changes: [PolicyChange] = []
        var outcomes: [ItemOutcome] = []
        for (domain, paths) in groups {
            let controller = try await manager.controller(for: domain)
            let result = await controller.setPolicy(change, paths: paths, events: bar.handler)
            changes += result.changes
            outcomes += result.outcomes
        }
        bar.finish()
        await manager.close()
        try Self.finish(changes, outcomes, json: output.json)
    }

    /// Prints what setting policies did: a line per item set, then the downloads and evictions
    /// the new policies caused (`--json`: `{"policies": [...], "items": [...]}`).
    /// - Throws: `CommandFailure` when any item failed; `CommandInterrupted` after a signal.
    static func finish(_ changes: [PolicyChange], _ outcomes: [ItemOutcome], json: Bool) throws {
        if !json {
            var text = ""
            for change in changes {
                text += "\(Output.name(change.path)): \(Output.text(label(change)))"
                if !change.cleared.isEmpty {
                    let shown = change.cleared.prefix(5).map(Output.name).joined(separator: ", ")
                    let more = change.cleared.count > 5 ? ", …" : ""
                    text +=
                        "; the policies set below it were removed (\(change.cleared.count) item\(change.cleared.count == 1 ? "" : "s"): \(shown)\(more))"
                }
                text += "\n"
            }
            Output.write(text)
        }
        let downloads = changes.contains { $0.policy == .eager }
        let evictions = changes.contains { $0.policy == .onlineOnly }
        if downloads || evictions || json {
            let verb = downloads && evictions ? "downloaded or evicted" : downloads ? "downloaded" : "evicted"
            let rows = changes.map(PolicyJSON.init)
            try Output.finish(outcomes, verb: verb, json: json) { items in PolicySetJSON(policies: rows, items: items) }
            return
        }
        var failed = false
        for outcome in outcomes where outcome.error != nil {
            Output.error(outcome.message ?? outcome.path)
            failed = true
        }
        if failed { throw CommandFailure() }
    }

    /// `eager (set on it)`, `eager (through d:/photos)`, `lazy (the default)`.
    static func label(_ change: PolicyChange) -> String {
        switch change.setOn {
        case nil: return "\(change.policy.rawValue) (the default)"
        case change.path: return "\(change.policy.rawValue) (set on it)"
        case let setOn?: return "\(change.policy.rawValue) (through \(setOn))"
        }
    }

    /// Prints each item's policy and where it is set.
    private func show(_ groups: [(domain: String, paths: [String])], _ manager: ProviderManager) async throws {
        var rows: [PolicyJSON] = []
        var text = ""
        var failed = false
        for (domain, paths) in groups {
            let controller = try await manager.controller(for: domain)
            for path in paths {
                do {
                    let policy = try controller.effectivePolicy(at: path)
                    rows.append(PolicyJSON(domain: domain, policy))
                    text += "\(Output.name("\(domain):/\(path)")): \(Output.text(policy.label(domain: domain)))\n"
                } catch {
                    Output.error(ItemOutcome(path: "\(domain):/\(path)", error: error).message ?? error.message)
                    failed = true
                }
            }
        }
        await manager.close()
        if output.json { try Output.json(rows) } else { Output.write(text) }
        if failed { throw CommandFailure() }
    }
}

/// An item's policy in `policy --json`.
struct PolicyJSON: Encodable {
    /// `DOMAIN:/path`.
    var path: String
    var policy: String
    /// Where the policy is set, `DOMAIN:/path`; `null` for the default.
    var setOn: String?
    /// `policy` set: the items below whose own policies were removed.
    var cleared: [String]?

    init(domain: String, _ policy: EffectivePolicy) {
        path = "\(domain):/\(policy.path)"
        self.policy = policy.policy.rawValue
        setOn = policy.setOn.map { "\(domain):/\($0)" }
    }

    init(_ change: PolicyChange) {
        path = change.path
        policy = change.policy.rawValue
        setOn = change.setOn
        cleared = change.cleared
    }

    enum CodingKeys: String, CodingKey { case path, policy, setOn, cleared }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(policy, forKey: .policy)
        try container.encode(setOn, forKey: .setOn)
        try container.encodeIfPresent(cleared, forKey: .cleared)
    }
}

/// What `policy PATH… POLICY --json` prints.
struct PolicySetJSON: Encodable {
    var policies: [PolicyJSON]
    /// The downloads and evictions the policies caused, and the failures.
    var items: [OutcomeJSON]
}
