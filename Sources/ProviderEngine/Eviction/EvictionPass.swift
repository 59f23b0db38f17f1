import Foundation
import ProviderStore

/// Why automatic eviction took a file.
public enum EvictionReason: Sendable, Hashable {
    /// The domain held more than its own budget.
    case domainBudget(domain: String, used: Int64, budget: Int64)
    /// All domains together held more than the home's budget.
    case globalBudget(used: Int64, budget: Int64)
    /// The replicas' file system had less free than the free-space floor.
    case freeSpaceFloor(mountPoint: String, available: Int64, floor: Int64)
    /// The file is `online-only`: not kept once programs are done with it.
    case onlineOnly(setOn: String)

    /// A stable name for scripts: `domain-budget`, `global-budget`, `free-space-floor` or
    /// `online-only`.
    public var kind: String {
        switch self {
        case .domainBudget: return "domain-budget"
        case .globalBudget: return "global-budget"
        case .freeSpaceFloor: return "free-space-floor"
        case .onlineOnly: return "online-only"
        }
    }

    /// The reason in words, with the numbers that decided it.
    public var description: String {
        switch self {
        case .domainBudget(let domain, let used, let budget):
            return "over the budget of \(domain): \(ByteCount.format(used)) used of \(ByteCount.format(budget))"
        case .globalBudget(let used, let budget):
            return "over the budget of all domains: \(ByteCount.format(used)) used of \(ByteCount.format(budget))"
        case .freeSpaceFloor(let mountPoint, let available, let floor):
            return
                "below the free-space floor: \(ByteCount.format(available)) free on \(mountPoint), \(ByteCount.format(floor)) to keep free"
        case .onlineOnly(let setOn):
            return "online-only (set on \(setOn))"
        }
    }

    /// Whether a budget or the floor asked for it (rather than the file's policy).
    var isPressure: Bool {
        if case .onlineOnly = self { return false }
        return true
    }
}

/// A file automatic eviction took.
public struct EvictedFile: Codable, Hashable, Sendable {
    public var domain: String
    /// The item's path in the domain, starting with `/`.
    public var path: String
    /// Bytes given back.
    public var bytes: Int64
    /// Partly downloaded (progressive hydration) rather than materialized.
    public var partial: Bool
    /// ``EvictionReason/kind``.
    public var kind: String
    /// ``EvictionReason/description``.
    public var reason: String
}

/// A file automatic eviction looked at and left, and why (pinned, open, local changes).
public struct KeptFile: Codable, Hashable, Sendable {
    public var domain: String
    /// The item's path in the domain, starting with `/`.
    public var path: String
    public var reason: String
}

/// What a domain holds after a pass, against its budget.
public struct DomainCacheState: Codable, Hashable, Sendable {
    public var domain: String
    /// Bytes of materialized files and present ranges.
    public var used: Int64
    public var materialized: Int64
    public var partial: Int64
    /// The domain's own budget; `nil` for none.
    public var budget: Int64?
}

/// What one pass of automatic eviction did (``Evictor/run()``).
public struct EvictionPass: Codable, Hashable, Sendable {
    /// Files evicted, in order.
    public var evicted: [EvictedFile] = []
    /// Files looked at and left.
    public var kept: [KeptFile] = []
    /// The domains of the pass after it.
    public var domains: [DomainCacheState] = []
    /// The budget of all domains together, bytes; `nil` for none.
    public var cacheBudget: Int64?
    /// Bytes the replicas' file systems keep free; `nil` for none.
    public var freeSpaceFloor: Int64?
    /// What could not be done: a budget still exceeded after every evictable file went, a
    /// domain another process was syncing, a setting that is not a size.
    public var notices: [String] = []

    /// Bytes given back.
    public var evictedBytes: Int64 { evicted.reduce(0) { $0.addingReportingOverflow($1.bytes).partialValue } }
}
