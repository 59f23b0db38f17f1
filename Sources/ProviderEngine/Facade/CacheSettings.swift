import Foundation
import ProviderCore
import ProviderStore

/// The home's settings of automatic eviction (table `setting`), shared by every domain.
public struct CacheSettings: Codable, Hashable, Sendable {
    /// The most bytes of downloaded contents all domains together keep; `nil` for no limit.
    public var cacheBudget: Int64?
    /// The bytes the file system of each replica keeps free: below it, files are evicted;
    /// `nil` for no floor.
    public var freeSpaceFloor: Int64?

    public init(cacheBudget: Int64? = nil, freeSpaceFloor: Int64? = nil) {
        self.cacheBudget = cacheBudget
        self.freeSpaceFloor = freeSpaceFloor
    }

    /// Reads the settings. A value that is not a byte count (written by hand, or by a newer
    /// version) counts as not set, with a notice saying so.
    /// - Throws: `localIOFailure` when the database fails.
    static func load(from store: MetadataStore) throws(FileProviderError) -> (settings: CacheSettings, notices: [String]) {
        var notices: [String] = []
        func bytes(_ key: String) throws(FileProviderError) -> Int64? {
            guard let text = try store.setting(key) else { return nil }
            guard let value = Int64(text), value >= 0 else {
                notices.append(
                    "the setting \(key) is not a byte count ('\(text.prefix(40))'); it is ignored: set it again with 'fileproviderctl cache'"
                )
                return nil
            }
            return value
        }
        let settings = CacheSettings(
            cacheBudget: try bytes(MetadataStore.SettingKey.cacheBudget),
            freeSpaceFloor: try bytes(MetadataStore.SettingKey.freeSpaceFloor))
        return (settings, notices)
    }
}

extension ProviderManager {
    /// The home's eviction settings.
    /// - Throws: `localIOFailure` when the database fails.
    public func cacheSettings() throws(FileProviderError) -> CacheSettings {
        try CacheSettings.load(from: store).settings
    }

    /// Sets the budget of all domains together (`nil`: none). A running `serve` applies it at
    /// its next eviction pass (within seconds).
    /// - Throws: `invalidArgument` for a negative budget; `localIOFailure` when the database fails.
    public func setGlobalCacheBudget(_ bytes: Int64?) throws(FileProviderError) {
        if let bytes, bytes < 0 { throw FileProviderError(.invalidArgument, "a cache budget cannot be negative") }
        try store.setSetting(MetadataStore.SettingKey.cacheBudget, bytes.map(String.init))
    }

    /// Sets the bytes the replicas' file systems keep free (`nil`: no floor).
    /// - Throws: `invalidArgument` for a negative floor; `localIOFailure` when the database fails.
    public func setFreeSpaceFloor(_ bytes: Int64?) throws(FileProviderError) {
        if let bytes, bytes < 0 { throw FileProviderError(.invalidArgument, "a free-space floor cannot be negative") }
        try store.setSetting(MetadataStore.SettingKey.freeSpaceFloor, bytes.map(String.init))
    }

    /// Sets a domain's own cache budget (`nil`: none). A running `serve` applies it at its next
    /// eviction pass.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `invalidArgument` for a
    ///   negative budget; `localIOFailure` when the database fails.
    public func setCacheBudget(ofDomain name: String, _ bytes: Int64?) throws(FileProviderError) {
        let domain = try domain(named: name)
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(name) has no id") }
        try store.setCacheBudget(domainID: id, bytes)
    }

    /// Sets how a dataless domain fetches files that programs read (see ``Hydration``); in a
    /// placeholder-files domain it is kept for a later conversion.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `localIOFailure` when the
    ///   database fails.
    public func setHydration(ofDomain name: String, _ hydration: Hydration) throws(FileProviderError) {
        let domain = try domain(named: name)
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(name) has no id") }
        try store.setHydration(domainID: id, hydration)
    }

    /// The bytes of contents a domain holds (materialized files, present ranges).
    /// - Throws: `localIOFailure` when the database fails.
    public func cacheUsage(of domain: DomainRecord) throws(FileProviderError) -> CacheUsage {
        guard let id = domain.id else { return CacheUsage() }
        return try store.cacheUsage(domainID: id)
    }

    /// A domain's last automatic evictions, newest first.
    /// - Throws: `localIOFailure` when the database fails.
    public func evictions(of domain: DomainRecord, limit: Int = 5) throws(FileProviderError) -> [EvictionRecord] {
        guard let id = domain.id else { return [] }
        return try store.evictions(domainID: id, limit: limit)
    }

    /// Asks the eviction loop of a `serve` running in this process for a pass soon (after a
    /// download, say); nothing happens without one. Any thread; never blocks.
    public func requestEviction() {
        evictionWakeup.withLock { $0 }?()
    }
}
