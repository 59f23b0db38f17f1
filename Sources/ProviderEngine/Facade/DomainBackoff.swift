import Foundation
import ProviderStore

/// Why and until when a domain is backing off.
public struct DomainBackoff: Sendable, Hashable, Codable {
    /// Failures in a row.
    public var failureCount: Int
    /// When the next attempt may run.
    public var nextRetryAt: Date
    /// The last failure's message.
    public var error: String?

    /// The backoff recorded on a domain, or `nil` when it is not backing off.
    public init?(_ domain: DomainRecord) {
        guard domain.failureCount > 0, let next = domain.nextRetryAt else { return nil }
        failureCount = domain.failureCount
        nextRetryAt = next
        error = domain.lastError
    }

    /// Whether the domain must still wait at `now`.
    public func isWaiting(at now: Date = Date()) -> Bool { nextRetryAt > now }
}
