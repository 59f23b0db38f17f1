import ArgumentParser
import ProviderCore
import ProviderEngine

/// Item paths given on the command line, resolved and grouped by domain.
struct ItemArguments: ParsableArguments {
    @Argument(help: ArgumentHelp("Items: DOMAIN:/path or a path inside a replica folder.", valueName: "path"), completion: .itemPaths)
    var paths: [String]

    /// The paths by domain, in the order the domains first appear.
    func grouped(_ manager: ProviderManager) throws(FileProviderError) -> [(domain: String, paths: [String])] {
        try Self.grouped(paths, manager)
    }

    /// `paths` resolved and grouped by domain, in the order the domains first appear.
    static func grouped(_ paths: [String], _ manager: ProviderManager) throws(FileProviderError) -> [(
        domain: String, paths: [String]
    )] {
        var order: [String] = []
        var byDomain: [String: [String]] = [:]
        for argument in paths {
            let location = try manager.resolve(argument)
            if byDomain[location.domain] == nil { order.append(location.domain) }
            byDomain[location.domain, default: []].append(location.path)
        }
        return order.map { ($0, byDomain[$0] ?? []) }
    }

    /// Runs `body` once per domain with that domain's paths and `tally`'s handler, then closes
    /// the manager. Every domain's controller is made first: a domain that cannot be opened
    /// stops the command before anything is done or printed.
    func forEachDomain(
        _ manager: ProviderManager, into tally: OutcomeTally,
        _ body: (DomainController, String, [String], OutcomeHandler) async -> Void
    ) async throws {
        var controllers: [(DomainController, String, [String])] = []
        for (domain, paths) in try grouped(manager) { controllers.append((try await manager.controller(for: domain), domain, paths)) }
        for (controller, domain, paths) in controllers { await body(controller, domain, paths, tally.handler) }
        await manager.close()
    }

    /// Runs `body` once per domain with that domain's paths, closes the manager, and returns
    /// every outcome.
    func forEachDomain(
        _ manager: ProviderManager, _ body: (DomainController, String, [String]) async -> [ItemOutcome]
    ) async throws -> [ItemOutcome] {
        var outcomes: [ItemOutcome] = []
        for (domain, paths) in try grouped(manager) {
            let controller = try await manager.controller(for: domain)
            outcomes += await body(controller, domain, paths)
        }
        await manager.close()
        return outcomes
    }
}
