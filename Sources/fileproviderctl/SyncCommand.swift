import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Send local changes up and bring replicas up to date with their stores.",
        discussion: """
            First scans each replica for local changes (new, edited, moved, renamed and deleted \
            files and folders) and sends them to the store with the version they were based on; \
            when both sides changed, both versions are kept (see 'fileproviderctl conflicts'). \
            Then lists each store and compares it with the database: new items become placeholders, \
            changed items are updated (downloaded files whose contents changed are downloaded \
            again, or evicted where their content policy is evict-on-remote-update or online-only \
            and they have no local changes), moved items are moved, deleted items are removed; \
            items whose policy is eager (pinned) are downloaded (see 'fileproviderctl policy'). \
            A downloaded file with local changes is never removed. Without names, every connected \
            domain is synced (one whose backend is not available here is skipped with a \
            warning). One sync of a domain runs at a time: while 'serve' (or another \
            'sync') is syncing the same domain, this one says so and waits for it to finish.

            A sync that skipped items of the store (a name the replica cannot hold, an \
            impossible value, a folder moved into itself) or did not send local changes (refused \
            by the store, excluded from sync) exits 3 after a last line on standard error that \
            counts them; 'fileproviderctl status' shows them with why, 'fileproviderctl pending' \
            the changes not sent. -v prints a line per item transferred, -vv a line per request \
            to the store (secrets masked).

            The database learns every item; the replica shows the items of populated folders. \
            Folders the replica already shows get their new items; folders new to the replica are \
            populated up to --populate-limit entries and stay dataless (empty) after that, as \
            Apple's system leaves folders dataless until they are opened. 'fileproviderctl \
            populate', 'materialize' and 'pin' populate them, and 'serve' does when a program \
            opens one.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: "Domains to sync (default: all).", completion: .domainNames)
    var names: [String] = []

    @Flag(help: "Only bring remote changes down; leave local changes for later.")
    var downloadOnly = false

    @Option(help: "At most this many entries are written into folders new to the replica; the rest stay dataless.")
    var populateLimit = DomainController.defaultPopulationBudget

    func validate() throws {
        if populateLimit < 0 { throw ValidationError("--populate-limit must be 0 or more") }
    }

    func run() async throws {
        let manager = try global.manager()
        let all = names.isEmpty ? try manager.domains() : []
        await AdapterList.describeExternal(of: names.isEmpty ? all : names.compactMap { try? manager.domain(named: $0) })
        // Without names: every connected domain whose backend this program has. A domain whose
        // backend is missing is no failure (another program syncs it); named, it is one.
        let domains = names.isEmpty ? all.filter { $0.isConnected && manager.isBackendAvailable(for: $0) }.map(\.name) : names
        for name in domains { _ = try manager.domain(named: name) }
        var skipped: [SyncSkipped] = []
        for domain in all where !domain.isConnected {
            Output.warning("\(domain.name): disconnected, not synced ('fileproviderctl domain connect \(domain.name)')")
            skipped.append(SyncSkipped(domain: domain.name, reason: "disconnected"))
        }
        for domain in all where domain.isConnected && !manager.isBackendAvailable(for: domain) {
            Output.warning("\(domain.name): backend '\(domain.backendKind)' not available, not synced")
            skipped.append(SyncSkipped(domain: domain.name, reason: "backend not available"))
        }
        var reports: [SyncReport] = []
        var failures: [SyncFailure] = []
        var interruption: String?
        var incomplete = false
        for (index, name) in domains.enumerated() {
            let bar = ProgressBar(label: name, options: progress)
            let events = Self.events(of: name, drawingOn: bar)
            do {
                let controller = try await manager.controller(for: name)
                // One sync and the process ends: a feed that lives in this process is not started.
                let report = try await controller.sync(
                    events: events, upload: !downloadOnly, populationBudget: populateLimit, followChanges: false)
                bar.finish()
                reports.append(report)
                if !output.json { Self.show(report) }
                if report.unreachable != nil { incomplete = true }
            } catch {
                bar.finish()
                let wrapped = FileProviderError.wrap(error)
                failures.append(SyncFailure(domain: name, error: wrapped.message, code: wrapped.code.name))
                if wrapped.code == .cancelled && Interruption.shared.signal != nil {
                    // Interrupted: say what was done and what was not; the other domains wait.
                    var line = "\(name): \(wrapped.message)"
                    let rest = domains[(index + 1)...]
                    if !rest.isEmpty { line += "; not synced: \(rest.joined(separator: ", "))" }
                    interruption = line
                    break
                }
                if !output.json { Output.error("\(name): \(wrapped.message)") }
            }
        }
        await manager.close()
        if output.json {
            try Output.json(
                SyncJSON(reports: reports, failures: failures, skipped: skipped, peakResidentBytes: PeakMemory.residentBytes()))
        }
        if let interruption {
            FileHandle.standardError.write(Data("interrupted: \(interruption); run the same command again to finish\n".utf8))
            throw CommandInterrupted()
        }
        if !failures.isEmpty || incomplete { throw CommandFailure() }
        try Self.endIfPartial(reports)
    }
}

extension SyncCommand {
    /// The line a sync that left something undone ends with on standard error, or `nil` when
    /// every domain was synced in full: `photos: 3 items skipped, 1 change not sent; see
    /// 'fileproviderctl status photos' for why, 'fileproviderctl pending photos' for the changes
    /// not sent, 'fileproviderctl why photos:/PATH' for one item`.
    static func partialSummary(_ reports: [SyncReport]) -> String? {
        let partial = reports.filter(\.isPartial)
        guard !partial.isEmpty else { return nil }
        let skipped = partial.reduce(0) { $0 + $1.skipped }
        let notSent = partial.reduce(0) { $0 + $1.notSent }
        let names = partial.map(\.domain)
        let domain = names.count == 1 ? names[0] : "DOMAIN"
        var line = names.count == 1 ? "\(domain): " : "\(names.joined(separator: ", ")): "
        line += SyncReport.problemSummary(skipped: skipped, notSent: notSent) ?? ""
        line += "; see 'fileproviderctl status\(names.count == 1 ? " " + domain : "")' for why"
        if notSent > 0 { line += ", 'fileproviderctl pending \(domain)' for the changes not sent" }
        line += ", 'fileproviderctl why \(domain):/PATH' for one item"
        return line
    }

    /// Ends a command whose syncs left something undone: the line of ``partialSummary(_:)`` on
    /// standard error, then ``CommandPartial`` (exit 3). Returns when every sync was whole.
    /// - Throws: ``CommandPartial`` when a report is partial.
    static func endIfPartial(_ reports: [SyncReport]) throws {
        guard let line = partialSummary(reports) else { return }
        FileHandle.standardError.write(Data((TerminalText.escaped(line) + "\n").utf8))
        throw CommandPartial()
    }
}

extension SyncCommand {
    /// What a sync of the domain `name` reports as it goes: drawn on `bar`; when it waits for
    /// another process's sync of the domain, the bar ends and a line on standard error says so.
    static func events(of name: String, drawingOn bar: ProgressBar) -> EventHandler {
        let draw = bar.handler
        return { event in
            if case .waitingForSync(let process, let serving) = event {
                bar.finish()
                FileHandle.standardError.write(Data("\(name): \(Self.waiting(process, serving))\n".utf8))
            }
            draw?(event)
        }
    }

    /// Prints what a sync of a domain did (a line on standard output), its notices and, when
    /// the store stopped answering during it, an error line (the sync then fails: synced as far
    /// as the store answered, and the domain backs off).
    static func show(_ report: SyncReport) {
        let name = report.domain
        print(
            "\(name): \(report.uploaded) local changes sent, \(report.conflicts) conflicts; \(report.listedItems) items listed, "
                + "\(report.added) added, \(report.updated) updated, \(report.moved) moved, \(report.deleted) deleted, "
                + "\(report.downloaded) downloaded"
                + (report.evictedOnUpdate > 0 ? ", \(report.evictedOnUpdate) evicted (changed in the store)" : "")
                + " in \(String(format: "%.2f", report.seconds)) s")
        for notice in report.notices { Output.warning(notice) }
        if let unreachable = report.unreachable {
            Output.error(
                "\(name): the store stopped answering during the sync (\(unreachable)); what it listed was synced, the rest is kept as it was and synced once it answers"
            )
        }
    }

    /// What a sync waits for, in words.
    static func waiting(_ process: Int32?, _ serving: Bool) -> String {
        switch (process, serving) {
        case (let pid?, true): return "waiting for serve (process \(pid)) to finish its sync of this domain"
        case (let pid?, false): return "waiting for process \(pid) to finish its sync of this domain"
        case (nil, _): return "waiting for another process to finish its sync of this domain"
        }
    }
}

struct SyncFailure: Encodable {
    var domain: String
    var error: String
    var code: String
}

/// A domain a sync of all domains left out, and why: `disconnected` or `backend not available`.
struct SyncSkipped: Encodable {
    var domain: String
    var reason: String
}

struct SyncJSON: Encodable {
    var reports: [SyncReport]
    var failures: [SyncFailure]
    var skipped: [SyncSkipped]
    /// The process's peak resident memory while it ran (``PeakMemory``); left out where the
    /// system does not say.
    var peakResidentBytes: Int64?
}
