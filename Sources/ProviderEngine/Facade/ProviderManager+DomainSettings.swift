import Foundation
import ProviderCore
import ProviderStore

extension ProviderManager {
    /// Disconnects a domain (`connected` false) or connects it again, as Apple's
    /// `NSFileProviderManager.disconnect(reason:options:)` and `reconnect()`: a disconnected
    /// domain keeps its replica folder and its database records, and syncs nothing: a sync of it
    /// throws `providerDomainTemporarilyUnavailable`, `serve` skips it (a running one pauses it
    /// and resumes once it is connected again), `sync` without names leaves it out. Local
    /// changes made meanwhile are sent by the first sync after it is connected.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `localIOFailure` when the
    ///   database fails.
    public func setConnected(ofDomain name: String, _ connected: Bool) throws(FileProviderError) {
        let domain = try domain(named: name)
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(name) has no id") }
        try store.setConnected(domainID: id, connected)
    }

    /// Changes backend options of a domain, with the checks of ``addDomain(name:kind:options:replicaPath:ignorePatterns:mode:cacheBudget:hydration:)``:
    /// `values` are set, the options named in `removing` go back to their defaults (or are left
    /// out); the result is validated against the backend's descriptor, may not put a local store
    /// path over a replica, and must reach the store (its root item) before it is saved. A
    /// controller this process holds for the domain is closed, so the next use takes the new
    /// options; another process (a running `serve`) takes them when it opens the domain again.
    ///
    /// Changing the store the domain points at (`--root`, `--host`, `--url`) is a change of the
    /// store's contents to the next sync: items the new store lacks are removed from the replica
    /// (never a file with local changes), its items come down.
    ///
    /// Path options are stored absolute, as ``BackendDescriptor/normalizingPaths(_:relativeTo:)``
    /// makes them (`~` expanded, relative to the current directory).
    ///
    /// - Returns: the domain as saved.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `backendNotAvailable` when this
    ///   program does not have the domain's backend; `invalidArgument` for an unknown
    ///   option, a value of the wrong type, a missing required option, or a store path over a
    ///   replica; what the backend throws when the store cannot be reached with them (nothing is
    ///   saved then); `localIOFailure` when the database fails.
    @discardableResult
    public func setBackendOptions(
        ofDomain name: String, _ values: [String: String], removing: [String] = []
    ) async throws(FileProviderError) -> DomainRecord {
        try await PoolCheck.during("domain set") { () async throws(FileProviderError) -> DomainRecord in
            try await settingBackendOptions(ofDomain: name, values, removing: removing)
        }
    }

    private func settingBackendOptions(
        ofDomain name: String, _ values: [String: String], removing: [String]
    ) async throws(FileProviderError) -> DomainRecord {
        let store = self.store
        let (domain, others) = try await blocking { [self] () throws(FileProviderError) in
            (try self.domain(named: name), try store.domains())
        }
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(name) has no id") }
        let descriptor = try descriptor(of: domain)
        let values = descriptor.normalizingPaths(values)
        let known = Set(descriptor.options.map(\.name))
        for option in removing where !known.contains(option) {
            let list = descriptor.options.map { "--\($0.name)" }.joined(separator: ", ")
            throw FileProviderError(.invalidArgument, "the \(descriptor.kind) backend has no option --\(option); its options are \(list)")
        }
        var merged = domain.options
        for option in removing { merged[option] = nil }
        merged.merge(values) { _, new in new }
        var configuration = try descriptor.validate(merged)
        configuration.domainName = name

        var folders = [(domain.replicaPath, "the replica folder \(domain.replicaPath)", "choose a store path outside it")]
        if let backing = try? backingURL(of: domain) {
            folders.append((backing.path, "the backing folder \(backing.path)", "choose a store path outside it"))
        }
        for other in others where other.id != id {
            folders.append((other.replicaPath, "the replica of domain '\(other.name)'", "choose a store path outside it"))
        }
        try Self.checkStorePaths(descriptor: descriptor, configuration: configuration, apartFrom: folders)

        let backend: any Backend
        do {
            backend = try await descriptor.factory(configuration)
        } catch {
            throw FileProviderError.wrap(error, as: .invalidArgument)
        }
        do {
            _ = try await CheckedBackend(backend).item(for: .rootContainer)
        } catch {
            await backend.close()
            throw FileProviderError(
                error.code, "cannot reach the store of '\(name)' with these options (nothing was changed): \(error.message)")
        }
        await backend.close()

        let stored = descriptor.redacted(configuration).values.filter { key, _ in
            descriptor.options.first { $0.name == key }?.isSecret != true
        }
        try await blocking { () throws(FileProviderError) in try store.setOptions(domainID: id, stored) }
        if let controller = controllers.withLock({ $0.removeValue(forKey: name) }) { await controller.close() }
        return try await blocking { [self] () throws(FileProviderError) in try self.domain(named: name) }
    }

    /// Checks ignore patterns: none empty, none with a line break (they are stored one per line).
    /// - Throws: `invalidArgument` naming the pattern.
    static func validateIgnorePatterns(_ patterns: [String]) throws(FileProviderError) {
        for pattern in patterns where pattern.isEmpty || pattern.contains("\n") || pattern.contains("\r") {
            throw FileProviderError(
                .invalidArgument, "an ignore pattern may not be empty or hold a line break: \(pattern.debugDescription)")
        }
    }

    /// Sets a domain's own ignore patterns (`*` and `?` wildcards): local names that match are
    /// never uploaded. A running `serve` takes them when it starts again.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `invalidArgument` for an empty
    ///   pattern or one with a line break; `localIOFailure` when the database fails.
    public func setIgnorePatterns(ofDomain name: String, _ patterns: [String]) throws(FileProviderError) {
        try Self.validateIgnorePatterns(patterns)
        let domain = try domain(named: name)
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(name) has no id") }
        try store.setIgnorePatterns(domainID: id, patterns)
    }
}
